// Images and videos from local files for the CLI: `ninfer run --image FILE --video FILE` and
// `ninfer chat`'s /image PATH. A user message's content holds {"type": "image" | "video",
// "path": FILE} parts beside its text; each turn loads them (server/media_parts.h does the
// decoding, preprocessing and placeholder layout the server does).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "media/preprocess.h"
#include "ninfer/engine.h"
#include "text/tokenizer.h"

namespace ninfer::app {

// A user message of `text` after the media files (images first, then videos, in order).
nlohmann::ordered_json user_message_with_media(const std::string& text,
                                               const std::vector<std::string>& images,
                                               const std::vector<std::string>& videos);

// Loads the media parts of `messages` (in render order), expands the placeholders of `ids` and
// attaches the media to `request`. No-op without media parts; an Error names the file when one
// does not load or the model has no vision tower.
void attach_file_media(const nlohmann::ordered_json& messages, const ModelInfo& info,
                       const media::VisionPreprocessConfig* config,
                       const text::Tokenizer& tokenizer, std::vector<int32_t>& ids,
                       GenerationRequest& request);

} // namespace ninfer::app
