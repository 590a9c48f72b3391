// Fuzzes the safetensors parser: the input is a whole image (8-byte little-endian header
// length, JSON header, data), parsed in place by io::parse_safetensors as the reader parses a
// mapped file. A bad image must raise ninfer::Error; every tensor it accepts must lie inside the
// data section with exactly dtype size x element count bytes, and is read whole: float tensors
// as f32 through convert_to_f32 and load_as_float (at whatever alignment the header leaves),
// the others byte by byte. ASan catches a read outside the image, UBSan a misaligned load.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "ninfer/error.h"

namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
        std::abort();
    }
}

// Reads every byte or element of an accepted tensor.
void read_tensor(const ninfer::io::TensorEntry& e, const uint8_t* data_begin, const uint8_t* end) {
    const auto* p = static_cast<const uint8_t*>(e.data);
    check(e.nbytes >= 0 && p >= data_begin && p <= end && e.nbytes <= end - p,
          "tensor outside the data section");
    if (!e.dtype_known) return;
    const int64_t n = e.numel();
    check(n * ninfer::dtype_size(e.dtype) == e.nbytes, "size does not match dtype x shape");
    if (ninfer::is_float(e.dtype)) {
        std::vector<float> values(static_cast<size_t>(n));
        ninfer::convert_to_f32(e.data, e.dtype, values.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const float v = ninfer::load_as_float(e.data, e.dtype, i);
            check(std::memcmp(&v, &values[size_t(i)], 4) == 0, "load_as_float != convert_to_f32");
        }
    } else {
        volatile uint8_t sum = 0;
        for (int64_t i = 0; i < e.nbytes; ++i) sum = uint8_t(sum + p[i]);
    }
    if (e.shape.size() <= 4) {
        const ninfer::TensorView v = e.view();
        check(v.numel() == n && v.data == e.data, "view does not cover the tensor");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<ninfer::io::TensorEntry> entries;
    try {
        entries = ninfer::io::parse_safetensors(data, int64_t(size), "fuzz.safetensors");
    } catch (const ninfer::Error&) {
        return 0;
    }
    check(size >= 8, "accepted an image without a header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
    const uint8_t* data_begin = data + 8 + header_len;
    for (const auto& e : entries) read_tensor(e, data_begin, data + size);
    return 0;
}
