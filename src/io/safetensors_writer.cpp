#include "io/safetensors_writer.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ninfer::io {

void write_safetensors(const std::filesystem::path& path,
                       const std::map<std::string, TensorSpec>& tensors,
                       const std::function<std::vector<uint8_t>(const std::string&)>& write,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header;
    if (!metadata.empty()) header["__metadata__"] = metadata;
    int64_t offset = 0;
    for (const auto& [name, spec] : tensors) {
        header[name] = {{"dtype", spec.dtype},
                        {"shape", spec.shape},
                        {"data_offsets", {offset, offset + spec.nbytes}}};
        offset += spec.nbytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' '); // the data starts 8-byte aligned
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) fail(ErrorCategory::Io, "cannot write ", path.string());
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8); // little-endian hosts only (x86, arm)
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& [name, spec] : tensors) {
        const std::vector<uint8_t> bytes = write(name);
        require(int64_t(bytes.size()) == spec.nbytes, "write_safetensors: tensor '", name,
                "' produced ", bytes.size(), " bytes, expected ", spec.nbytes);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    if (!out) fail(ErrorCategory::Io, "writing ", path.string(), " failed (disk full?)");
}

} // namespace ninfer::io
