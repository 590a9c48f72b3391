// Writes safetensors files: a header of tensor names, dtypes, shapes and offsets (names sorted,
// so the bytes depend only on the tensors), padded to 8 bytes, then the data. Tensors are
// produced one at a time by a callback, so a large checkpoint is never held in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ninfer::io {

struct TensorSpec {
    std::string dtype; // safetensors dtype name: "BF16", "F32", "F8_E4M3", ...
    std::vector<int64_t> shape;
    int64_t nbytes = 0;
};

// write(name) must return exactly spec.nbytes bytes for each tensor, in name order.
void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, TensorSpec>& tensors,
                       const std::function<std::vector<uint8_t>(const std::string&)>& write,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

} // namespace ninfer::io
