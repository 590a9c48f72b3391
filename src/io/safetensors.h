// Reads safetensors checkpoints by memory-mapping them: one file, a sharded checkpoint with
// model.safetensors.index.json, or a directory of *.safetensors files. Nothing is copied.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ninfer::io {

struct TensorEntry {
    std::string name;
    std::string dtype_name; // as written in the header ("BF16", "F8_E4M3", ...)
    bool dtype_known = false;
    DType dtype = DType::U8;
    std::vector<int64_t> shape;
    const void* data = nullptr;
    int64_t nbytes = 0;
    std::string file; // the shard that holds it

    int64_t numel() const;
    // A CPU view over the mapped bytes (requires a known dtype and rank <= 4).
    TensorView view() const;
    std::string shape_string() const; // "[4, 128]"
};

class SafetensorsCheckpoint {
public:
    // Opens a file, or a directory (index json, else model.safetensors, else every *.safetensors).
    static SafetensorsCheckpoint open(const std::filesystem::path& path);

    const TensorEntry* find(const std::string& name) const;
    const std::map<std::string, TensorEntry>& entries() const { return entries_; }
    // Keeps the mappings alive as long as any holder of this pointer lives.
    std::shared_ptr<const void> keepalive() const { return mappings_; }
    std::vector<std::string> files() const;

private:
    void add_file(const std::filesystem::path& file);

    std::map<std::string, TensorEntry> entries_;
    std::shared_ptr<std::vector<std::shared_ptr<const void>>> mappings_ =
        std::make_shared<std::vector<std::shared_ptr<const void>>>();
    std::vector<std::string> file_names_;
};

// Parses one safetensors image held in memory (header + data); used by the reader and the fuzzer.
std::vector<TensorEntry> parse_safetensors(const uint8_t* bytes, int64_t size,
                                           const std::string& file_label);

} // namespace ninfer::io
