#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace ninfer::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A header larger than this is not a checkpoint header (the real 35B header is ~150 KB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

[[noreturn]] void fail_io(const std::string& file, const std::string& what) {
    fail(ErrorCategory::Io, file, ": ", what);
}

std::shared_ptr<const void> map_file(const fs::path& path, int64_t* size_out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_io(path.string(), concat("cannot open: ", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        fail_io(path.string(), "cannot stat");
    }
    int64_t size = st.st_size;
    void* addr = nullptr;
    if (size > 0) addr = ::mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (addr == MAP_FAILED) fail_io(path.string(), concat("mmap failed: ", std::strerror(errno)));
    *size_out = size;
    if (size == 0) return std::shared_ptr<const void>(nullptr, [](const void*) {});
    return std::shared_ptr<const void>(
        addr, [size](const void* p) { ::munmap(const_cast<void*>(p), size_t(size)); });
}

TensorEntry parse_entry(const std::string& name, const json& info, const uint8_t* data_begin,
                        int64_t data_size, const std::string& file) {
    TensorEntry e;
    e.name = name;
    e.file = file;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
        fail_io(file, concat("tensor '", name, "': header entry lacks dtype/shape/data_offsets"));
    const json& dtype = info["dtype"];
    const json& shape = info["shape"];
    const json& offsets = info["data_offsets"];
    if (!dtype.is_string() || !shape.is_array() || !offsets.is_array() || offsets.size() != 2)
        fail_io(file, concat("tensor '", name, "': malformed header entry"));
    e.dtype_name = dtype.get<std::string>();
    e.dtype_known = dtype_from_safetensors(e.dtype_name, &e.dtype);
    // Size arithmetic fails with an error that names the tensor and the file.
    auto mul = [&](int64_t a, int64_t b) {
        int64_t product = 0;
        if (__builtin_mul_overflow(a, b, &product))
            fail_io(file, concat("tensor '", name, "': shape ", e.shape_string(), " overflows"));
        return product;
    };
    int64_t numel = 1;
    for (const json& d : shape) {
        if (!d.is_number_unsigned() ||
            d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            fail_io(file, concat("tensor '", name, "': bad dimension"));
        e.shape.push_back(d.get<int64_t>());
        numel = mul(numel, e.shape.back());
    }
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
        fail_io(file, concat("tensor '", name, "': bad data_offsets"));
    uint64_t begin = offsets[0].get<uint64_t>();
    uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > uint64_t(data_size))
        fail_io(file, concat("tensor '", name, "': data_offsets [", begin, ", ", end,
                             ") outside the data section of ", data_size, " bytes"));
    e.nbytes = int64_t(end - begin);
    e.data = data_begin + begin;
    if (e.dtype_known && mul(numel, dtype_size(e.dtype)) != e.nbytes)
        fail_io(file, concat("tensor '", name, "': ", e.nbytes, " bytes do not match ",
                             e.dtype_name, e.shape_string()));
    return e;
}

} // namespace

int64_t TensorEntry::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string TensorEntry::shape_string() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

TensorView TensorEntry::view() const {
    require(dtype_known, "tensor '", name, "' has unsupported dtype ", dtype_name);
    require(shape.size() <= size_t(kMaxDims), "tensor '", name, "' has rank ", shape.size());
    return TensorView::contiguous(const_cast<void*>(data), dtype, Device::cpu(), shape.data(),
                                  int(shape.size()));
}

std::vector<TensorEntry> parse_safetensors(const uint8_t* bytes, int64_t size,
                                           const std::string& file) {
    if (size < 8) fail_io(file, "too small to be a safetensors file");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i]; // little endian
    if (header_len > kMaxHeaderBytes || header_len > uint64_t(size - 8))
        fail_io(file,
                concat("header length ", header_len, " is invalid for a file of ", size, " bytes"));
    json header = json::parse(bytes + 8, bytes + 8 + header_len, nullptr, false);
    if (header.is_discarded() || !header.is_object()) fail_io(file, "header is not a JSON object");
    const uint8_t* data_begin = bytes + 8 + header_len;
    int64_t data_size = size - 8 - int64_t(header_len);
    std::vector<TensorEntry> out;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        out.push_back(parse_entry(it.key(), it.value(), data_begin, data_size, file));
    }
    return out;
}

void SafetensorsCheckpoint::add_file(const fs::path& file) {
    int64_t size = 0;
    auto mapping = map_file(file, &size);
    mappings_->push_back(mapping);
    file_names_.push_back(file.filename().string());
    auto parsed =
        parse_safetensors(static_cast<const uint8_t*>(mapping.get()), size, file.string());
    for (auto& e : parsed) {
        if (entries_.count(e.name))
            fail_io(file.string(),
                    concat("tensor '", e.name, "' also appears in ", entries_[e.name].file));
        std::string key = e.name;
        entries_.emplace(std::move(key), std::move(e));
    }
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const fs::path& path) {
    SafetensorsCheckpoint ckpt;
    if (!fs::exists(path)) fail_io(path.string(), "does not exist");
    if (!fs::is_directory(path)) {
        ckpt.add_file(path);
        return ckpt;
    }
    fs::path index = path / "model.safetensors.index.json";
    if (fs::exists(index)) {
        std::ifstream in(index);
        json j = json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
            fail_io(index.string(), "not a valid index (no weight_map object)");
        std::set<std::string> shards;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string()) fail_io(index.string(), "weight_map values must be names");
            std::string shard = it.value().get<std::string>();
            if (shard.find('/') != std::string::npos || shard == "..")
                fail_io(index.string(), concat("shard name '", shard, "' is not a plain file"));
            shards.insert(shard);
        }
        for (const auto& shard : shards) ckpt.add_file(path / shard);
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            const TensorEntry* e = ckpt.find(it.key());
            if (!e || e->file != (path / it.value().get<std::string>()).string())
                fail_io(index.string(), concat("tensor '", it.key(), "' is not in shard ",
                                               it.value().get<std::string>()));
        }
        return ckpt;
    }
    if (fs::exists(path / "model.safetensors")) {
        ckpt.add_file(path / "model.safetensors");
        return ckpt;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path))
        if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) fail_io(path.string(), "holds no .safetensors file");
    for (const auto& f : files) ckpt.add_file(f);
    return ckpt;
}

const TensorEntry* SafetensorsCheckpoint::find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsCheckpoint::files() const {
    return file_names_;
}

} // namespace ninfer::io
