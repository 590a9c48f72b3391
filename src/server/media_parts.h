// Images and videos in chat messages. The API translators normalise every media content part
// (OpenAI image_url / input_image / video_url, Anthropic image blocks) into
//   {"type": "image" | "video", "url": "data:<mime>;base64,<data>" | "http(s)://..."}
// inside the message's content array (the chat template renders each as its placeholder), and
// prepare_chat collects them in prompt order, loads them (media/) and lays their placeholder
// tokens into the prompt exactly as HF's Qwen3-VL processor does.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ninfer/engine.h"
#include "server/model_context.h"
#include "server/request_fields.h"

namespace ninfer::server {

// The normalised part of an OpenAI-style media part (image_url with a string or {url} value,
// input_image with image_url, video_url), or null when `part` is not a media part. `param`
// names the request field in errors.
Json openai_media_part(const Json& part, const std::string& where, const char* param);
// The normalised part of an Anthropic image block (source base64 with media_type, or url).
Json anthropic_media_part(const Json& block, const std::string& where);

struct MediaRef {
    bool video = false;
    std::string url;
};
// The media parts of the messages, in the order the template renders them.
std::vector<MediaRef> collect_media(const Json& messages);

// Loads (data URLs; http(s) only when the server allows it), decodes and preprocesses each
// medium for the served model; 400 with a clear message for anything that does not load.
struct LoadedMedia {
    std::vector<MediaInput> inputs;
    std::vector<std::vector<double>> timestamps; // per medium: a video's group times (s)
};
LoadedMedia load_media(const ModelContext& m, const std::vector<MediaRef>& refs);
// One medium from its encoded bytes (an Error from media/ when it does not decode); appends it
// (and a video's timestamps) to `out`. The CLI's --image / --video use it too.
void load_medium(const media::VisionPreprocessConfig& config, bool video,
                 std::span<const uint8_t> bytes, LoadedMedia& out);

// Expands each placeholder of `ids` (one <|image_pad|> or <|video_pad|> token per medium, as the
// template renders them) into the medium's tokens and records their offsets in the inputs:
// an image becomes n = t*h*w / merge^2 image pads; a video, per temporal group, the text
// "<%.1f seconds>" then <|vision_start|>, its pads and <|vision_end|> (Qwen3VLProcessor).
void lay_out_media(const ModelInfo& info, const text::Tokenizer& tokenizer,
                   std::vector<int32_t>& ids, LoadedMedia& media);

} // namespace ninfer::server
