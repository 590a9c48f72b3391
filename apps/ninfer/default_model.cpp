#include "default_model.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "hf_cache.h"

namespace ninfer::app {
namespace fs = std::filesystem;

namespace {

bool is_model_dir(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "config.json", ec);
}

fs::path executable_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec); // Linux
    return ec ? fs::path() : exe.parent_path();
}

std::vector<fs::path> candidates() {
    const fs::path name = fs::path("models") / kDefaultModelName;
    std::vector<fs::path> out;
    fs::path dir = executable_dir();
    if (!dir.empty()) {
        for (int up = 0; up <= 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
            out.push_back(dir / name);
            if (dir == dir.root_path()) break;
        }
        out.push_back(executable_dir().parent_path() / "share" / "ninfer" / name);
    }
#ifdef NINFER_SOURCE_DIR
    out.push_back(fs::path(NINFER_SOURCE_DIR) / name);
#endif
#ifdef NINFER_INSTALL_DATADIR
    out.push_back(fs::path(NINFER_INSTALL_DATADIR) / name);
#endif
    return out;
}

} // namespace

std::string default_model_dir() {
    if (const char* env = std::getenv("NINFER_MODEL"); env && *env) {
        if (!is_model_dir(env))
            fail(ErrorCategory::Io, "NINFER_MODEL=", env,
                 " is not a model directory (no config.json)");
        return env;
    }
    std::string looked;
    std::vector<std::string> seen;
    for (const fs::path& dir : candidates()) {
        const std::string path = dir.lexically_normal().string();
        if (std::find(seen.begin(), seen.end(), path) != seen.end()) continue;
        seen.push_back(path);
        if (is_model_dir(path)) return path;
        looked += "\n  " + path;
    }
    fail(ErrorCategory::Io, "no --model given and the default model '", kDefaultModelName,
         "' was not found; looked in:", looked,
         "\npass --model DIR or set NINFER_MODEL (the model is built by tools/train_demo/)");
}

std::string model_dir_or_default(const std::string& flag_value) {
    if (flag_value.empty()) return default_model_dir();
    std::string given;
    try {
        given = hub_path(flag_value);
    } catch (const Error& e) {
        fail(ErrorCategory::Io, "--model ", e.what());
    }
    std::error_code ec;
    const fs::file_status st = fs::status(given, ec);
    if (!fs::exists(st)) fail(ErrorCategory::Io, "--model ", given, ": no such directory");
    if (fs::is_directory(st) && !is_model_dir(given))
        fail(ErrorCategory::Io, "--model ", given,
             ": not a model directory (no config.json; a Hugging Face checkpoint directory holds "
             "config.json, the *.safetensors weights and the tokenizer files)");
    return given;
}

} // namespace ninfer::app
