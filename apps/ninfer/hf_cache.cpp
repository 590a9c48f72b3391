#include "hf_cache.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace ninfer::app {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

bool is_id_part(const std::string& p) {
    if (p.empty() || p == "." || p == "..") return false;
    return std::all_of(p.begin(), p.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
    });
}

// The first line of a refs/ file, trimmed: a commit hash.
std::string read_ref(const fs::path& file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
        line.pop_back();
    return line;
}

} // namespace

fs::path hf_hub_cache_dir() {
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
        if (const std::string v = env(name); !v.empty()) return v;
    if (const std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
    if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty())
        return fs::path(xdg) / "huggingface" / "hub";
    return fs::path(env("HOME")) / ".cache" / "huggingface" / "hub";
}

bool looks_like_repo_id(const std::string& s) {
    const size_t slash = s.find('/');
    if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return false;
    if (s.front() == '.') return false;
    return is_id_part(s.substr(0, slash)) && is_id_part(s.substr(slash + 1));
}

std::optional<fs::path> find_cached_snapshot(const fs::path& cache, const std::string& id) {
    const size_t slash = id.find('/');
    const fs::path repo = cache / ("models--" + id.substr(0, slash) + "--" + id.substr(slash + 1));
    std::error_code ec;
    if (!fs::is_directory(repo, ec)) return std::nullopt;
    const fs::path snapshots = repo / "snapshots";
    if (const fs::path ref = repo / "refs" / "main"; fs::is_regular_file(ref, ec)) {
        const std::string hash = read_ref(ref);
        if (!hash.empty() && fs::is_directory(snapshots / hash, ec)) return snapshots / hash;
        fail(ErrorCategory::Io, "the Hugging Face cache's ", repo.string(),
             ": refs/main names snapshot '", hash, "', which is not in snapshots/ (an "
             "interrupted download? run `huggingface-cli download ", id, "` again)");
    }
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(snapshots, ec))
        if (e.is_directory(ec)) found.push_back(e.path());
    if (found.size() == 1) return found.front();
    std::string names;
    for (const fs::path& p : found) {
        names.append(names.empty() ? "" : ", ");
        names.append(p.filename().string());
    }
    fail(ErrorCategory::Io, "the Hugging Face cache's ", repo.string(), " has ", found.size(),
         " snapshots (", names.empty() ? "none" : names, ") and no refs/main to choose one: "
         "pass the snapshot directory as --model");
}

std::string hub_path(const std::string& given) {
    std::error_code ec;
    if (fs::exists(given, ec) || !looks_like_repo_id(given)) return given;
    const fs::path cache = hf_hub_cache_dir();
    if (const auto snapshot = find_cached_snapshot(cache, given)) return snapshot->string();
    fail(ErrorCategory::Io, given, ": no such directory, and no model ", given,
         " in the Hugging Face cache (", cache.string(), "; $HF_HUB_CACHE or $HF_HOME move it): "
         "download it with `huggingface-cli download ", given, "`, or pass its directory");
}

std::optional<std::string> repo_id_of_snapshot(const fs::path& dir) {
    const fs::path d = fs::absolute(dir).lexically_normal();
    const fs::path p = d.has_filename() ? d : d.parent_path(); // a trailing '/' leaves no name
    if (p.parent_path().filename() != "snapshots") return std::nullopt;
    const std::string folder = p.parent_path().parent_path().filename().string();
    if (folder.rfind("models--", 0) != 0) return std::nullopt;
    const std::string rest = folder.substr(8);
    const size_t sep = rest.find("--");
    if (sep == std::string::npos) return std::nullopt;
    const std::string id = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
    return looks_like_repo_id(id) ? std::optional<std::string>(id) : std::nullopt;
}

} // namespace ninfer::app
