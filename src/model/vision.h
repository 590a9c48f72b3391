// The Qwen3.5/3.6 vision tower (model.visual.*), written only with ops:: as the text model is:
// patch embedding + the interpolated learned position embedding, ViT blocks with the axial 2-D
// rotary and bidirectional attention within each frame, and the spatial merger to the text
// hidden size (HF's Qwen3_5VisionModel; docs/VISION.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/hf_config.h"
#include "model/weights.h"
#include "ops/exec_context.h"

namespace ninfer::model {

// One image or video in patches: t temporal groups (an image has t = 1) of h x w patches, h and w
// multiples of the spatial merge size. Its pixel rows come in HF's processor order: per temporal
// group, merge blocks in raster order, the merge x merge patches of a block in raster order.
struct MediaGrid {
    int64_t t = 1, h = 0, w = 0;
    int64_t patches() const { return t * h * w; }
    int64_t merged(int64_t merge) const { return t * (h / merge) * (w / merge); }
};

// Host-side tables of one encode call (exposed for the tests).
struct VisionTables {
    std::vector<int32_t> segments;     // [S+1]: one attention segment per temporal group
    std::vector<float> cos, sin;       // [N, head_dim / 2]: the axial rotary (h half, w half)
    std::vector<int32_t> pos_index;    // [N, 4]: bilinear taps into the pos_embed grid
    std::vector<float> pos_weight;     // [N, 4]
};
VisionTables vision_tables(const io::VisionConfig& config, const std::vector<MediaGrid>& grids);

class VisionEncoder {
public:
    VisionEncoder(const io::ModelConfig& config, const VisionWeights& weights, Device device);
    ~VisionEncoder();

    // pixels: [N, C*Tp*P*P] on the device in the activation dtype, N = sum of grids' patches,
    // the media one after another. out: [sum of merged tokens, H] (H the text hidden size) on the
    // device, activation dtype: the embeddings of each medium's placeholder tokens, in order.
    void encode(const ops::ExecContext& ctx, const std::vector<MediaGrid>& grids,
                const TensorView& pixels, const TensorView& out);
    int64_t scratch_bytes() const;
    // Allocates the activation scratch of a `patches`-patch call now (the engine reserves the
    // largest before it plans the KV cache).
    void reserve(const ops::ExecContext& ctx, int64_t patches);

    // Floating-point operations of encoding the grids (for throughput figures).
    static double flops(const io::ModelConfig& config, const std::vector<MediaGrid>& grids);

private:
    struct Scratch;
    // One ViT block over N patches; segments: the call's attention segments (host).
    void block(const ops::ExecContext& ctx, const VisionBlockWeights& w, int64_t N,
               const std::vector<int32_t>& segments);

    const io::ModelConfig& config_;
    const VisionWeights& weights_;
    Device device_;
    std::unique_ptr<Scratch> scratch_;
};

// Checks a grid against the tower's geometry; throws InvalidArgument naming the problem.
void validate_media_grid(const io::VisionConfig& config, const MediaGrid& grid);

} // namespace ninfer::model
