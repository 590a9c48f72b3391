// Models in the Hugging Face hub cache, as `huggingface-cli download ORG/NAME` (huggingface_hub)
// leaves them, so that `--model ORG/NAME` finds a downloaded checkpoint without its path:
//   CACHE/models--ORG--NAME/refs/main           the commit hash of the revision "main"
//   CACHE/models--ORG--NAME/snapshots/<hash>/   the checkpoint's files (symlinks into blobs/)
// Nothing is downloaded: ninfer reads the cache only.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace ninfer::app {

// The hub cache directory, as huggingface_hub picks it: $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// $HOME/.cache/huggingface/hub (empty set variables count as unset).
std::filesystem::path hf_hub_cache_dir();

// Whether `s` reads as a hub model id ORG/NAME: two non-empty parts of letters, digits, '-', '_'
// and '.', neither of them "." or "..", and no leading '.' (so "./x" and "../x" stay paths).
bool looks_like_repo_id(const std::string& s);

// The snapshot directory of model `id` in `cache`: the one refs/main names, else the only
// snapshot; nullopt when the cache has no such model. Raises ninfer::Error (Io) when the model is
// there but no snapshot can be chosen (refs/main names a missing snapshot, or several snapshots
// and no refs/main), naming what it found.
std::optional<std::filesystem::path> find_cached_snapshot(const std::filesystem::path& cache,
                                                          const std::string& id);

// What a directory flag names: `given` itself when that path exists or does not read as ORG/NAME,
// else the model's snapshot in hf_hub_cache_dir(). Raises ninfer::Error (Io) when the cache lacks
// it (the message says where it looked and how to download it) or find_cached_snapshot does.
std::string hub_path(const std::string& given);

// "ORG/NAME" when `dir` is a snapshot directory of a hub cache (.../models--ORG--NAME/snapshots/
// <hash>), else nullopt: the name a server gives such a model by default.
std::optional<std::string> repo_id_of_snapshot(const std::filesystem::path& dir);

} // namespace ninfer::app
