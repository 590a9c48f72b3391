// vision_config parsing (hf_config.h).
#include <climits>
#include <cmath>
#include <cstdint>

#include "io/config_reader.h"
#include "io/hf_config.h"

namespace ninfer::io {
using nlohmann::json;

namespace {
// Bounds of the vision fields: a few times the releases' figures (in the comments), so that
// patch, position and weight sizes stay far from int64 overflow.
constexpr int64_t kMaxDepth = 256;                     // 27
constexpr int64_t kMaxWidth = int64_t(1) << 15;        // 1,152
constexpr int64_t kMaxHeads = 256;                     // 16
constexpr int64_t kMaxIntermediate = int64_t(1) << 18; // 4,304
constexpr int64_t kMaxChannels = 16;                   // 3
constexpr int64_t kMaxPatch = 64;                      // 16 (temporal 2, merge 2)
constexpr int64_t kMaxPositions = int64_t(1) << 20;    // 2,304
} // namespace

int64_t VisionConfig::grid_side() const {
    return int64_t(std::llround(std::sqrt(double(num_position_embeddings))));
}

void parse_vision_config(const json& top, ModelConfig& c, const std::string& source) {
    const json& v = top["vision_config"];
    Reader r{v, source};
    VisionConfig& vc = c.vision;
    vc.depth = r.integer("depth", vc.depth, 1, kMaxDepth);
    vc.hidden_size = r.integer("hidden_size", vc.hidden_size, 1, kMaxWidth);
    vc.num_heads = r.integer("num_heads", vc.num_heads, 1, kMaxHeads);
    vc.intermediate_size = r.integer("intermediate_size", vc.intermediate_size, 1, kMaxIntermediate);
    vc.in_channels = r.integer("in_channels", vc.in_channels, 1, kMaxChannels);
    vc.patch_size = r.integer("patch_size", vc.patch_size, 1, kMaxPatch);
    vc.temporal_patch_size = r.integer("temporal_patch_size", vc.temporal_patch_size, 1, kMaxPatch);
    vc.spatial_merge_size = r.integer("spatial_merge_size", vc.spatial_merge_size, 1, kMaxPatch);
    vc.num_position_embeddings = r.integer("num_position_embeddings", vc.num_position_embeddings, 1, kMaxPositions);
    vc.out_hidden_size = r.integer("out_hidden_size", c.hidden_size, 1, INT64_MAX);
    const std::string act = v.value("hidden_act", std::string("gelu_pytorch_tanh"));
    if (act != "gelu_pytorch_tanh")
        fail(ErrorCategory::Unsupported, source, ": vision_config hidden_act '", act,
             "' is not supported (gelu_pytorch_tanh)");
    if (v.contains("rope_parameters") && v["rope_parameters"].is_object()) {
        const json& rp = v["rope_parameters"];
        const std::string type = rp.value("rope_type", std::string("axial"));
        if (type != "axial")
            fail(ErrorCategory::Unsupported, source, ": vision rope_type '", type,
                 "' is not supported (axial)");
        vc.rope_theta = Reader{rp, source}.number("rope_theta", vc.rope_theta);
    }
    if (vc.hidden_size % vc.num_heads) r.bad("num_heads", "must divide hidden_size");
    // The axial rotary splits each head in two halves (height, width) of rotated pairs.
    if (vc.head_dim() % 4) r.bad("num_heads", "must give a head dim divisible by 4");
    const int64_t side = vc.grid_side();
    if (side * side != vc.num_position_embeddings)
        r.bad("num_position_embeddings", "must be a square number");
    if (vc.out_hidden_size != c.hidden_size)
        r.bad("out_hidden_size", concat("is ", vc.out_hidden_size, " but the text hidden size is ",
                                        c.hidden_size));
    Reader tr{top, source};
    auto id = [&](const char* key, int32_t fallback) {
        return int32_t(tr.integer(key, fallback, 0, INT32_MAX));
    };
    c.image_token_id = id("image_token_id", c.image_token_id);
    c.video_token_id = id("video_token_id", c.video_token_id);
    c.vision_start_token_id = id("vision_start_token_id", c.vision_start_token_id);
    c.vision_end_token_id = id("vision_end_token_id", c.vision_end_token_id);
}

} // namespace ninfer::io
