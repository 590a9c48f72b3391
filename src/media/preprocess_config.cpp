#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "media/preprocess.h"

namespace ninfer::media {
namespace {
using nlohmann::json;

// Qwen2VLImageProcessor's class defaults (what HF uses for keys a present file lacks).
ImageProcessorConfig image_class_defaults() {
    ImageProcessorConfig c;
    c.min_pixels = 56 * 56;
    c.max_pixels = 28 * 28 * 1280;
    c.patch_size = 14;
    c.image_mean = {0.48145466, 0.4578275, 0.40821073}; // OPENAI_CLIP_MEAN
    c.image_std = {0.26862954, 0.26130258, 0.27577711}; // OPENAI_CLIP_STD
    return c;
}

// Qwen3VLVideoProcessor's class defaults.
VideoProcessorConfig video_class_defaults() {
    VideoProcessorConfig c;
    c.min_pixels = 128 * 32 * 32;
    c.max_pixels = 32 * 32 * 768;
    c.patch_size = 16;
    c.image_mean = {0.5, 0.5, 0.5}; // IMAGENET_STANDARD_MEAN
    c.image_std = {0.5, 0.5, 0.5};
    return c;
}

struct Reader {
    const json& j;
    const char* file;

    [[noreturn]] void bad(const char* key, const std::string& why) const {
        fail_invalid(file, ": '", key, "' ", why);
    }
    bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
    int64_t integer(const char* key, int64_t fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (v.is_number_integer()) return v.get<int64_t>();
        if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())))
            return static_cast<int64_t>(v.get<double>());
        bad(key, concat("must be an integer, got ", v.dump()));
    }
    double number(const char* key, double fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (!v.is_number()) bad(key, concat("must be a number, got ", v.dump()));
        return v.get<double>();
    }
    bool boolean(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (!v.is_boolean()) bad(key, concat("must be true or false, got ", v.dump()));
        return v.get<bool>();
    }
    std::array<double, 3> triple(const char* key, std::array<double, 3> fallback) const {
        if (!has(key)) return fallback;
        const json& v = j[key];
        if (v.is_number()) return {v.get<double>(), v.get<double>(), v.get<double>()};
        if (!v.is_array() || v.size() != 3)
            bad(key, concat("must be a number or a list of 3 numbers, got ", v.dump()));
        std::array<double, 3> out{};
        for (size_t i = 0; i < 3; ++i) {
            if (!v[i].is_number()) bad(key, concat("must hold numbers, got ", v.dump()));
            out[i] = v[i].get<double>();
        }
        return out;
    }
};

void read_common(const Reader& r, ProcessorConfig& c) {
    if (r.has("size")) {
        const json& s = r.j["size"];
        if (!s.is_object() || !s.contains("shortest_edge") || !s.contains("longest_edge"))
            r.bad("size", concat("must hold shortest_edge and longest_edge, got ", s.dump()));
        Reader sr{s, r.file};
        c.min_pixels = sr.integer("shortest_edge", c.min_pixels);
        c.max_pixels = sr.integer("longest_edge", c.max_pixels);
    }
    c.patch_size = r.integer("patch_size", c.patch_size);
    c.temporal_patch_size = r.integer("temporal_patch_size", c.temporal_patch_size);
    c.merge_size = r.integer("merge_size", c.merge_size);
    c.do_resize = r.boolean("do_resize", c.do_resize);
    c.do_rescale = r.boolean("do_rescale", c.do_rescale);
    c.do_normalize = r.boolean("do_normalize", c.do_normalize);
    c.rescale_factor = r.number("rescale_factor", c.rescale_factor);
    c.image_mean = r.triple("image_mean", c.image_mean);
    c.image_std = r.triple("image_std", c.image_std);
    if (r.has("resample") && r.integer("resample", 3) != 3)
        fail(ErrorCategory::Unsupported, r.file, ": resample ", r.j["resample"].dump(),
             " is not supported (only 3, bicubic)");
    for (const char* key : {"do_center_crop", "do_pad"})
        if (r.boolean(key, false))
            fail(ErrorCategory::Unsupported, r.file, ": '", key, "' is not supported");
    if (c.patch_size <= 0 || c.temporal_patch_size <= 0 || c.merge_size <= 0)
        r.bad("patch_size", "patch_size, temporal_patch_size and merge_size must be positive");
    if (c.min_pixels < 0 || c.max_pixels <= 0 || c.min_pixels > c.max_pixels)
        r.bad("size", concat("needs 0 <= shortest_edge <= longest_edge, got ", c.min_pixels,
                             " and ", c.max_pixels));
    for (double s : c.image_std)
        if (s == 0.0) r.bad("image_std", "must not be zero");
    if (!(c.rescale_factor > 0.0)) r.bad("rescale_factor", "must be positive");
}

json parse(std::string_view text, const char* file) {
    try {
        json j = json::parse(text.begin(), text.end());
        if (!j.is_object()) fail_invalid(file, ": must be a JSON object");
        return j;
    } catch (const json::exception& e) {
        fail_invalid(file, ": invalid JSON: ", e.what());
    }
}

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorCategory::Io, "cannot read ", path.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

VisionPreprocessConfig parse_preprocess_config(std::string_view image_json,
                                               std::string_view video_json) {
    VisionPreprocessConfig config;
    if (!image_json.empty()) {
        constexpr const char* file = "preprocessor_config.json";
        json j = parse(image_json, file);
        Reader r{j, file};
        ImageProcessorConfig c = image_class_defaults();
        read_common(r, c);
        // Qwen2VLImageProcessor.__init__: legacy min_pixels / max_pixels override size.
        c.min_pixels = r.integer("min_pixels", c.min_pixels);
        c.max_pixels = r.integer("max_pixels", c.max_pixels);
        if (c.min_pixels < 0 || c.max_pixels <= 0 || c.min_pixels > c.max_pixels)
            r.bad("max_pixels", concat("needs 0 <= min_pixels <= max_pixels, got ", c.min_pixels,
                                       " and ", c.max_pixels));
        config.image = c;
    }
    if (!video_json.empty()) {
        constexpr const char* file = "video_preprocessor_config.json";
        json j = parse(video_json, file);
        Reader r{j, file};
        VideoProcessorConfig c = video_class_defaults();
        read_common(r, c);
        c.do_sample_frames = r.boolean("do_sample_frames", c.do_sample_frames);
        c.fps = r.number("fps", c.fps);
        if (r.has("num_frames")) c.num_frames = r.integer("num_frames", 0);
        c.min_frames = r.integer("min_frames", c.min_frames);
        c.max_frames = r.integer("max_frames", c.max_frames);
        c.cap_pixels_per_frame = r.boolean("cap_pixels_per_frame", c.cap_pixels_per_frame);
        c.max_video_tokens = r.integer("max_video_tokens", c.max_video_tokens);
        if (!(c.fps > 0.0)) r.bad("fps", "must be positive");
        if (c.num_frames && *c.num_frames <= 0) r.bad("num_frames", "must be positive");
        if (c.min_frames <= 0 || c.max_frames < c.min_frames)
            r.bad("max_frames", "needs 0 < min_frames <= max_frames");
        config.video = c;
    }
    return config;
}

VisionPreprocessConfig load_preprocess_config(const std::filesystem::path& model_dir) {
    namespace fs = std::filesystem;
    std::string image, video;
    fs::path ip = model_dir / "preprocessor_config.json";
    fs::path vp = model_dir / "video_preprocessor_config.json";
    if (fs::exists(ip)) image = read_text(ip);
    if (fs::exists(vp)) video = read_text(vp);
    try {
        // An empty file would read as "absent": let the JSON parser reject it.
        return parse_preprocess_config(image.empty() && fs::exists(ip) ? " " : image,
                                       video.empty() && fs::exists(vp) ? " " : video);
    } catch (const Error& e) {
        throw Error(e.category(), concat(e.what(), " (in ", model_dir.string(), ")"));
    }
}

} // namespace ninfer::media
