// Multimodal prompts in the runtime: where a request's media placeholders sit, the 3-axis mRoPE
// positions HF's get_rope_index gives them, the prefix-cache keys that tell one image from
// another, and the vision encoder's output cache (docs/VISION.md).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/hf_config.h"
#include "model/qwen3_5.h"
#include "ninfer/engine.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

struct Sequence;

// Patches of one vision tower call (the engine reserves its scratch at start): a medium may have
// at most this many (65536 patches: a 4096 x 4096-pixel image, or 16 frame groups of 1024^2).
inline constexpr int64_t kMaxMediaPatches = 65536;

// One run of placeholder tokens: prompt tokens [begin, begin + count) take the embeddings
// [embed_begin, embed_begin + count) of medium `media`, laid out as a grid of rows x cols merged
// tokens (one temporal group).
struct MediaRun {
    int64_t begin = 0, count = 0;
    int32_t media = 0;
    int64_t embed_begin = 0;
    int64_t rows = 0, cols = 0;
};

struct SequenceMedia {
    std::vector<MediaRun> runs; // in prompt order
    std::vector<model::MediaGrid> grids;
    std::vector<uint64_t> keys; // per medium: its content key (hash of pixels and grid)
    // [3, prompt length]: the (temporal, height, width) positions of the prompt tokens.
    std::vector<int32_t> mrope;
    int64_t prompt_length = 0;
    int64_t rope_delta = 0; // token i >= prompt length sits at i + rope_delta on every axis
    // Per medium: the tower's output [merged tokens, H] on the device (null until encoded).
    std::vector<std::shared_ptr<Tensor>> embeds;
};

// Checks a request's media against the model (a tower, the grids, the placeholder runs, every
// placeholder token covered exactly once); throws InvalidArgument naming the problem.
void validate_media(const GenerationRequest& request, const io::ModelConfig& config,
                    bool has_vision);
// The layout of a validated request's media (null for a text prompt).
std::unique_ptr<SequenceMedia> layout_media(const GenerationRequest& request,
                                            const io::ModelConfig& config);
// The prompt as the prefix cache keys it: each placeholder token becomes a negative id drawn
// from its medium's key and its index, so different media never share an entry and the same
// medium at the same place does.
std::vector<int32_t> media_cache_tokens(const std::vector<int32_t>& prompt,
                                        const SequenceMedia& media);

// The rotary position of token i on axis a (0 temporal, 1 height, 2 width).
int32_t rope_position(const SequenceMedia* media, int64_t i, int axis);
// Whether tokens [begin, end) include a placeholder (their axes may differ: mRoPE needed).
bool has_media_rows(const SequenceMedia* media, int64_t begin, int64_t end);

// The vision tower's outputs by content key, least recently used dropped beyond a byte budget
// (a medium in use stays alive through its sequence's reference).
class MediaEncoderCache {
public:
    explicit MediaEncoderCache(int64_t budget_bytes) : budget_(budget_bytes) {}
    std::shared_ptr<Tensor> find(uint64_t key);
    void insert(uint64_t key, std::shared_ptr<Tensor> embeds);
    int64_t bytes() const { return bytes_; }
    int64_t hits() const { return hits_; }

private:
    struct Entry {
        std::shared_ptr<Tensor> embeds;
        std::list<uint64_t>::iterator lru;
    };
    int64_t budget_, bytes_ = 0, hits_ = 0;
    std::list<uint64_t> lru_; // most recent first
    std::unordered_map<uint64_t, Entry> entries_;
};

// Encodes (batched, in one tower call) the media that the rows [begin, end) of each listed
// sequence need and that are not encoded yet, taking what the cache holds.
struct MediaNeed {
    Sequence* seq = nullptr;
    int64_t begin = 0, end = 0;
};
void encode_media(const ops::ExecContext& ctx, model::Qwen35Model& model,
                  MediaEncoderCache& cache, const std::vector<MediaNeed>& needs);

// The media rows of a batch span: rows [begin, end) of seq placed at batch row `row0`.
void append_media_rows(const SequenceMedia& media, int64_t begin, int64_t end, int64_t row0,
                       std::vector<model::ForwardBatch::MediaRows>& out);

} // namespace ninfer::runtime
