#include "server/media_parts.h"

#include <cstdio>
#include <httplib.h>

#include "core/error.h"
#include "media/image.h"
#include "media/video.h"
#include "ninfer/error.h"
#include "server/api_error.h"

namespace ninfer::server {
namespace {

// Largest medium accepted, encoded (a data URL's payload or a fetched body).
constexpr size_t kMaxMediaBytes = size_t(64) << 20;

Json media(bool video, const std::string& url, const std::string& where, const char* param) {
    if (url.empty()) bad_param(param, where + ": the media part has no url");
    const bool data = url.rfind("data:", 0) == 0;
    const bool http = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
    if (!data && !http)
        bad_param(param, where + ": media urls must be data: or http(s): URLs (file:// and other "
                                 "schemes are never read)");
    return Json{{"type", video ? "video" : "image"}, {"url", url}};
}

std::string url_value(const Json& v, const std::string& where, const char* param) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("url") && v["url"].is_string())
        return v["url"].get<std::string>();
    bad_param(param, where + ": expected a url string or {\"url\": ...}");
}

int base64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62; // standard and URL-safe alphabets
    if (c == '/' || c == '_') return 63;
    return -1;
}

// RFC 4648 base64 (padding optional, whitespace ignored); 400 on any other character.
std::string decode_base64(const std::string& in, size_t begin, const std::string& where) {
    std::string out;
    out.reserve((in.size() - begin) / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    size_t i = begin;
    for (; i < in.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(in[i]);
        if (c == '=') break;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        const int v = base64_value(c);
        if (v < 0) bad_param("messages", where + ": the data URL is not valid base64");
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(char((acc >> bits) & 0xff));
        }
    }
    for (; i < in.size(); ++i)
        if (in[i] != '=' && in[i] != '\n' && in[i] != '\r')
            bad_param("messages", where + ": the data URL has data after its padding");
    return out;
}

std::string fetch_url(const std::string& url, const std::string& where) {
    const size_t scheme_end = url.find("://") + 3;
    const size_t path_at = url.find('/', scheme_end);
    const std::string origin = url.substr(0, path_at);
    const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
    httplib::Client client(origin);
    client.set_follow_location(true);
    client.set_connection_timeout(10);
    client.set_read_timeout(30);
    std::string body;
    bool too_large = false;
    auto res = client.Get(path, [&](const char* data, size_t n) {
        if (body.size() + n > kMaxMediaBytes) {
            too_large = true;
            return false;
        }
        body.append(data, n);
        return true;
    });
    if (too_large)
        bad_param("messages", where + ": the media at " + url + " exceeds " +
                                  std::to_string(kMaxMediaBytes >> 20) + " MB");
    if (!res)
        bad_param("messages", where + ": could not load " + url + " (" +
                                  httplib::to_string(res.error()) + ")");
    if (res->status != 200)
        bad_param("messages", where + ": loading " + url + " answered HTTP " +
                                  std::to_string(res->status));
    return body;
}

} // namespace

Json openai_media_part(const Json& part, const std::string& where, const char* param) {
    const std::string type = part.is_object() ? opt_string(part, "type").value_or("") : "";
    if (type == "image_url") {
        const Json* v = field(part, "image_url");
        if (!v) bad_param(param, where + ": an image_url part needs 'image_url'");
        return media(false, url_value(*v, where, param), where, param);
    }
    if (type == "input_image") { // Responses API: image_url is a string
        const Json* v = field(part, "image_url");
        if (!v) bad_param(param, where + ": input_image needs 'image_url' (file_id is not supported)");
        return media(false, url_value(*v, where, param), where, param);
    }
    if (type == "video_url") {
        const Json* v = field(part, "video_url");
        if (!v) bad_param(param, where + ": a video_url part needs 'video_url'");
        return media(true, url_value(*v, where, param), where, param);
    }
    return Json();
}

Json anthropic_media_part(const Json& block, const std::string& where) {
    const Json* source = field(block, "source");
    if (!source || !source->is_object())
        bad_param("messages", where + ": an image block needs a 'source' object");
    const std::string type = opt_string(*source, "type").value_or("");
    if (type == "base64") {
        const std::string mime = req_string(*source, "media_type");
        return media(false, "data:" + mime + ";base64," + req_string(*source, "data"), where,
                     "messages");
    }
    if (type == "url") return media(false, req_string(*source, "url"), where, "messages");
    bad_param("messages", where + ": image source type must be base64 or url");
}

std::vector<MediaRef> collect_media(const Json& messages) {
    std::vector<MediaRef> refs;
    for (const auto& msg : messages) {
        const Json* content = field(msg, "content");
        if (!content || !content->is_array()) continue;
        for (const auto& part : *content) {
            const std::string type = opt_string(part, "type").value_or("");
            if ((type == "image" || type == "video") && part.contains("url"))
                refs.push_back({type == "video", part["url"].get<std::string>()});
        }
    }
    return refs;
}

// The encoded bytes of a medium's URL.
std::string media_bytes(const ModelContext& m, const MediaRef& ref, const std::string& where) {
    if (ref.url.rfind("data:", 0) == 0) {
        const size_t comma = ref.url.find(',');
        if (comma == std::string::npos || ref.url.rfind(";base64", comma) == std::string::npos)
            bad_param("messages", where + ": data URLs must be base64 (data:<type>;base64,...)");
        if (ref.url.size() - comma > kMaxMediaBytes * 4 / 3 + 4)
            bad_param("messages", where + ": the medium exceeds " +
                                      std::to_string(kMaxMediaBytes >> 20) + " MB");
        return decode_base64(ref.url, comma + 1, where);
    }
    if (!m.allow_media_urls)
        bad_param("messages", where + ": http(s) media URLs are fetched only when the server "
                                      "runs with --allow-image-urls; send a base64 data URL");
    return fetch_url(ref.url, where);
}

void load_medium(const media::VisionPreprocessConfig& config, bool video,
                 std::span<const uint8_t> bytes, LoadedMedia& out) {
    media::Pixels px;
    MediaInput in;
    std::vector<double> stamps;
    if (!video) {
        const media::Image image = media::decode_image(bytes);
        px = media::preprocess_image(image, config);
        const media::ContentHash h = media::content_hash(image);
        in.content_hash = h.high ^ (h.low * 0x9e3779b97f4a7c15ull);
    } else {
        const media::Video v = media::decode_video(bytes, config.video);
        px = media::preprocess_video(v.frames, config);
        stamps = media::video_timestamps(v.frame_indices, v.fps, config.video.temporal_patch_size);
        // content_hash 0: the engine hashes the pixel values.
    }
    in.grid_t = int32_t(px.grid_thw[0]);
    in.grid_h = int32_t(px.grid_thw[1]);
    in.grid_w = int32_t(px.grid_thw[2]);
    in.video = video;
    in.pixels = std::make_shared<const std::vector<float>>(std::move(px.values));
    require(!video || int64_t(stamps.size()) >= in.grid_t,
            "video: fewer timestamps than temporal groups");
    out.inputs.push_back(std::move(in));
    out.timestamps.push_back(std::move(stamps));
}

LoadedMedia load_media(const ModelContext& m, const std::vector<MediaRef>& refs) {
    if (!m.vision || !m.engine->model_info().vision)
        bad_param("messages", "this model takes no images or videos (its checkpoint has no "
                              "vision tower)");
    LoadedMedia out;
    for (size_t i = 0; i < refs.size(); ++i) {
        const std::string where = std::string(refs[i].video ? "video " : "image ") +
                                  std::to_string(i + 1);
        const std::string bytes = media_bytes(m, refs[i], where);
        try {
            load_medium(*m.vision, refs[i].video,
                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                 bytes.size()),
                        out);
        } catch (const Error& e) {
            bad_param("messages", where + ": " + e.what());
        }
    }
    return out;
}

void lay_out_media(const ModelInfo& info, const text::Tokenizer& tokenizer,
                   std::vector<int32_t>& ids, LoadedMedia& loaded) {
    const int32_t merge2 = info.spatial_merge * info.spatial_merge;
    std::vector<int32_t> out;
    out.reserve(ids.size());
    size_t next = 0;
    for (int32_t id : ids) {
        const bool image = id == info.image_token_id, video = id == info.video_token_id;
        if (!image && !video) {
            out.push_back(id);
            continue;
        }
        if (next >= loaded.inputs.size() || loaded.inputs[next].video != video)
            bad_param("messages", "the rendered prompt's image and video placeholders do not "
                                  "match the request's media");
        MediaInput& in = loaded.inputs[next];
        const int32_t per_group = in.grid_h * in.grid_w / merge2;
        in.offsets.clear();
        if (image) {
            in.offsets.push_back(int32_t(out.size()));
            out.insert(out.end(), size_t(per_group), info.image_token_id);
        } else {
            for (int32_t g = 0; g < in.grid_t; ++g) {
                char stamp[48];
                std::snprintf(stamp, sizeof stamp, "<%.1f seconds>", loaded.timestamps[next][size_t(g)]);
                for (int32_t t : tokenizer.encode(stamp, false)) out.push_back(t);
                out.push_back(info.vision_start_token_id);
                in.offsets.push_back(int32_t(out.size()));
                out.insert(out.end(), size_t(per_group), info.video_token_id);
                out.push_back(info.vision_end_token_id);
            }
        }
        ++next;
    }
    if (next != loaded.inputs.size())
        bad_param("messages", "the chat template rendered " + std::to_string(next) + " of the " +
                                  std::to_string(loaded.inputs.size()) +
                                  " media placeholders (images in a system message?)");
    ids = std::move(out);
}

} // namespace ninfer::server
