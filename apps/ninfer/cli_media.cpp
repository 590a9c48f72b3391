#include "cli_media.h"

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "server/media_parts.h"

namespace ninfer::app {

nlohmann::ordered_json user_message_with_media(const std::string& text,
                                               const std::vector<std::string>& images,
                                               const std::vector<std::string>& videos) {
    if (images.empty() && videos.empty()) return {{"role", "user"}, {"content", text}};
    nlohmann::ordered_json parts = nlohmann::ordered_json::array();
    for (const auto& f : images) parts.push_back({{"type", "image"}, {"path", f}});
    for (const auto& f : videos) parts.push_back({{"type", "video"}, {"path", f}});
    parts.push_back({{"type", "text"}, {"text", text}});
    return {{"role", "user"}, {"content", parts}};
}

void attach_file_media(const nlohmann::ordered_json& messages, const ModelInfo& info,
                       const media::VisionPreprocessConfig* config,
                       const text::Tokenizer& tokenizer, std::vector<int32_t>& ids,
                       GenerationRequest& request) {
    server::LoadedMedia loaded;
    for (const auto& msg : messages) {
        if (!msg.contains("content") || !msg["content"].is_array()) continue;
        for (const auto& part : msg["content"]) {
            const std::string type = part.value("type", "");
            if ((type != "image" && type != "video") || !part.contains("path")) continue;
            const std::string path = part["path"].get<std::string>();
            require(info.vision && config, path, ": this model has no vision tower");
            std::ifstream in(path, std::ios::binary);
            if (!in) fail(ErrorCategory::Io, path, ": cannot open");
            const std::string bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
            try {
                server::load_medium(
                    *config, type == "video",
                    std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             bytes.size()),
                    loaded);
            } catch (const Error& e) {
                fail(e.category(), path, ": ", e.what());
            }
        }
    }
    if (loaded.inputs.empty()) return;
    server::lay_out_media(info, tokenizer, ids, loaded);
    request.media = std::move(loaded.inputs);
}

} // namespace ninfer::app
