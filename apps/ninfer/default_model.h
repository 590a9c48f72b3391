// The embedded default model: what `ninfer run`, `chat`, `perplexity`, `serve` and `bench` use
// when no --model is given.
#pragma once

#include <string>

namespace ninfer::app {

// models/<kDefaultModelName>/ holds the small trained demo model (tools/train_demo/).
inline constexpr const char* kDefaultModelName = "ninfer-demo";

// The default model directory (one with a config.json), the first of:
//   $NINFER_MODEL, when set (then it must be a model directory: no fallback);
//   models/<name> in the executable's directory or one of its 4 parent directories (a build
//   tree inside the source tree: build/apps/ninfer/ninfer -> models/<name>);
//   <exe dir>/../share/ninfer/models/<name> (an installed tree moved elsewhere);
//   the source tree the binary was built from (NINFER_SOURCE_DIR, compile time);
//   the install prefix (NINFER_INSTALL_DATADIR/models/<name>, compile time).
// Raises ninfer::Error (Io) naming every place it looked at when none holds the model.
std::string default_model_dir();

// `given` when it is not empty (it must exist and, when a directory, hold a config.json: else an
// Io error naming --model), else default_model_dir(). A `given` that is no path but reads as a
// hub model id (ORG/NAME) is its snapshot in the Hugging Face cache (hf_cache.h).
std::string model_dir_or_default(const std::string& given);

} // namespace ninfer::app
