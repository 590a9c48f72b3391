// Unit-test helpers (header-only): temp dirs, a safetensors writer, ninfer::Error assertions.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "ninfer/error.h"

namespace ninfer::test {

namespace fs = std::filesystem;
using nlohmann::json;

// The committed fixtures: every layout the loader supports appears in one of them.
inline const std::vector<std::string>& fixture_names() {
    static const std::vector<std::string> names = {"dense_text_sharded", "dense_vlm_mtp",
                                                   "moe_text_fused", "moe_vlm_per_expert"};
    return names;
}
inline fs::path fixture_path(const std::string& name) {
    return fs::path(fixtures_dir()) / name;
}

// A fresh directory under the system temp directory, removed (with its contents) on destruction.
class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        path_ = fs::temp_directory_path() /
                ("ninfer_unit_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

private:
    fs::path path_;
};

inline void write_file(const fs::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One tensor to write: its safetensors dtype string, shape and raw little-endian bytes.
struct StTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string bytes;
};

template <typename T> std::string raw_bytes(const std::vector<T>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A safetensors image: 8-byte little-endian header length, the header text, the data section.
inline std::string safetensors_raw(std::string_view header, std::string_view data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xffu);
    out.append(header);
    out.append(data);
    return out;
}

// The header of tensors packed back to back in the given order.
inline json safetensors_header(const std::vector<StTensor>& tensors,
                               const json& metadata = json()) {
    json header = json::object();
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const StTensor& t : tensors) {
        json shape = json::array();
        for (int64_t d : t.shape) shape.push_back(d);
        header[t.name] = {{"dtype", t.dtype},
                          {"shape", shape},
                          {"data_offsets", json::array({offset, offset + t.bytes.size()})}};
        offset += t.bytes.size();
    }
    return header;
}

inline std::string safetensors_image(const std::vector<StTensor>& tensors,
                                     const json& metadata = json()) {
    std::string data;
    for (const StTensor& t : tensors) data += t.bytes;
    return safetensors_raw(safetensors_header(tensors, metadata).dump(), data);
}

inline void write_safetensors(const fs::path& path, const std::vector<StTensor>& tensors) {
    write_file(path, safetensors_image(tensors, json{{"format", "pt"}}));
}

// Every tensor of a checkpoint (bytes copied), in name order.
inline std::vector<StTensor> read_tensors(const io::SafetensorsCheckpoint& ckpt) {
    std::vector<StTensor> out;
    for (const auto& [name, e] : ckpt.entries())
        out.push_back({name, e.dtype_name, e.shape,
                       std::string(static_cast<const char*>(e.data), size_t(e.nbytes))});
    return out;
}

inline StTensor* find_tensor(std::vector<StTensor>& tensors, const std::string& name) {
    for (StTensor& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

// Removes a tensor; returns it (the test fails when it is absent).
inline StTensor take_tensor(std::vector<StTensor>& tensors, const std::string& name) {
    for (auto it = tensors.begin(); it != tensors.end(); ++it)
        if (it->name == name) {
            StTensor t = std::move(*it);
            tensors.erase(it);
            return t;
        }
    ADD_FAILURE() << "no tensor " << name;
    return {};
}

// Copies a fixture's config.json into dir and writes the given tensors as dir/model.safetensors.
inline void write_fixture_copy(const std::string& fixture, const fs::path& dir,
                               const std::vector<StTensor>& tensors) {
    fs::copy_file(fixture_path(fixture) / "config.json", dir / "config.json",
                  fs::copy_options::overwrite_existing);
    write_safetensors(dir / "model.safetensors", tensors);
}

// The elements of a float-typed checkpoint tensor converted to f32.
inline std::vector<float> entry_to_f32(const io::TensorEntry& e) {
    std::vector<float> out(size_t(e.numel()));
    convert_to_f32(e.data, e.dtype, out.data(), e.numel());
    return out;
}
inline std::vector<float> bytes_to_f32(const StTensor& t) {
    DType dtype{};
    if (!dtype_from_safetensors(t.dtype, &dtype) || !is_float(dtype)) {
        ADD_FAILURE() << t.name << " is not a float tensor";
        return {};
    }
    std::vector<float> out(t.bytes.size() / size_t(dtype_size(dtype)));
    convert_to_f32(t.bytes.data(), dtype, out.data(), int64_t(out.size()));
    return out;
}

// The elements of a contiguous F32 host tensor.
inline std::vector<float> tensor_values(const TensorView& v) {
    if (v.dtype != DType::F32 || !v.device.is_cpu() || !v.is_contiguous()) {
        ADD_FAILURE() << "not a contiguous F32 host tensor: " << v.describe();
        return {};
    }
    return std::vector<float>(v.ptr<float>(), v.ptr<float>() + v.numel());
}

inline std::vector<int64_t> dims_of(const TensorView& v) {
    return std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.ndim);
}

// Passes when f throws ninfer::Error whose message contains every needle (and, when given, has
// the category); the message is streamed either way so failures show it.
template <typename F>
::testing::AssertionResult raises(F&& f, std::initializer_list<std::string_view> needles,
                                  std::optional<ErrorCategory> category = std::nullopt) {
    try {
        f();
    } catch (const Error& e) {
        const std::string what = e.what();
        for (std::string_view needle : needles)
            if (what.find(needle) == std::string::npos)
                return ::testing::AssertionFailure()
                       << "message \"" << what << "\" lacks \"" << needle << "\"";
        if (category && e.category() != *category)
            return ::testing::AssertionFailure()
                   << "category " << error_category_name(e.category()) << ", expected "
                   << error_category_name(*category) << " (message \"" << what << "\")";
        return ::testing::AssertionSuccess() << "raised \"" << what << "\"";
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << "threw a non-ninfer exception: " << e.what();
    }
    return ::testing::AssertionFailure() << "did not throw";
}

} // namespace ninfer::test
