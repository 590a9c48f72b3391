#include "runtime/media.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/memory.h"
#include "runtime/sequence.h"

namespace ninfer::runtime {
namespace {

uint64_t mix64(uint64_t x) { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The key of a medium: its caller's content hash (or one of its pixels) with its grid and kind.
uint64_t media_key(const MediaInput& m) {
    uint64_t h = m.content_hash;
    if (h == 0) {
        const std::vector<float>& px = *m.pixels;
        h = 0x9e3779b97f4a7c15ull;
        const size_t words = px.size() / 2;
        const auto* bytes = reinterpret_cast<const unsigned char*>(px.data());
        for (size_t i = 0; i < words; ++i) {
            uint64_t w;
            std::memcpy(&w, bytes + 8 * i, 8);
            h = (h ^ w) * 0x100000001b3ull;
        }
        if (px.size() % 2) {
            uint32_t w;
            std::memcpy(&w, bytes + 8 * words, 4);
            h = (h ^ w) * 0x100000001b3ull;
        }
        h = mix64(h);
    }
    for (int64_t v : {int64_t(m.grid_t), int64_t(m.grid_h), int64_t(m.grid_w), int64_t(m.video)})
        h = mix64(h ^ uint64_t(v));
    return h;
}

model::MediaGrid grid_of(const MediaInput& m) { return {m.grid_t, m.grid_h, m.grid_w}; }

} // namespace

void validate_media(const GenerationRequest& r, const io::ModelConfig& c, bool has_vision) {
    if (r.media.empty()) {
        for (int32_t id : r.prompt)
            require(!(c.has_vision && (id == c.image_token_id || id == c.video_token_id)),
                    "the prompt holds an image or video placeholder token (", id,
                    ") but the request has no media");
        return;
    }
    require(has_vision, "this model has no vision tower: it takes no images or videos");
    const io::VisionConfig& v = c.vision;
    const int64_t n = int64_t(r.prompt.size()), merge = v.spatial_merge_size;
    std::vector<uint8_t> covered(size_t(n), 0);
    for (size_t i = 0; i < r.media.size(); ++i) {
        const MediaInput& m = r.media[i];
        const model::MediaGrid g = grid_of(m);
        model::validate_media_grid(v, g);
        require(g.patches() <= kMaxMediaPatches, "media ", i, ": ", g.patches(),
                " patches exceed the ", kMaxMediaPatches, " of one vision tower call");
        require(m.video || m.grid_t == 1, "media ", i, ": an image has grid_t 1");
        require(m.pixels && int64_t(m.pixels->size()) == g.patches() * v.patch_values(),
                "media ", i, ": ", m.pixels ? m.pixels->size() : 0, " pixel values for a grid of ",
                g.patches(), " patches of ", v.patch_values());
        require(int64_t(m.offsets.size()) == g.t, "media ", i, ": ", m.offsets.size(),
                " placeholder runs for ", g.t, " temporal groups");
        const int64_t per_run = (g.h / merge) * (g.w / merge);
        const int32_t pad = m.video ? c.video_token_id : c.image_token_id;
        for (int32_t off : m.offsets) {
            require(off >= 0 && off + per_run <= n, "media ", i, ": placeholder run at ", off,
                    " of ", per_run, " tokens outside the prompt of ", n);
            for (int64_t k = off; k < off + per_run; ++k) {
                require(r.prompt[size_t(k)] == pad, "media ", i, ": prompt token ", k, " is ",
                        r.prompt[size_t(k)], ", not the placeholder ", pad);
                require(!covered[size_t(k)], "media ", i, ": placeholder runs overlap at ", k);
                covered[size_t(k)] = 1;
            }
        }
    }
    for (int64_t k = 0; k < n; ++k) {
        const int32_t id = r.prompt[size_t(k)];
        require(covered[size_t(k)] || (id != c.image_token_id && id != c.video_token_id),
                "prompt token ", k, " is a placeholder (", id, ") that no medium fills");
    }
}

std::unique_ptr<SequenceMedia> layout_media(const GenerationRequest& r, const io::ModelConfig& c) {
    if (r.media.empty()) return nullptr;
    auto out = std::make_unique<SequenceMedia>();
    const int64_t merge = c.vision.spatial_merge_size, n = int64_t(r.prompt.size());
    for (size_t i = 0; i < r.media.size(); ++i) {
        const MediaInput& m = r.media[i];
        out->grids.push_back(grid_of(m));
        out->keys.push_back(media_key(m));
        const int64_t rows = m.grid_h / merge, cols = m.grid_w / merge;
        for (size_t g = 0; g < m.offsets.size(); ++g)
            out->runs.push_back({m.offsets[g], rows * cols, int32_t(i), int64_t(g) * rows * cols,
                                 rows, cols});
    }
    out->embeds.resize(r.media.size());
    std::sort(out->runs.begin(), out->runs.end(),
              [](const MediaRun& a, const MediaRun& b) { return a.begin < b.begin; });
    // HF's get_rope_index: text advances every axis by one per token; a run (one temporal group,
    // as HF splits videos) puts token (y, x) at (p, p + y, p + x) and moves p on by max(rows, cols).
    out->prompt_length = n;
    out->mrope.assign(size_t(3 * n), 0);
    int64_t p = 0, max_pos = -1;
    size_t next = 0;
    for (int64_t i = 0; i < n;) {
        if (next < out->runs.size() && out->runs[next].begin == i) {
            const MediaRun& run = out->runs[next++];
            for (int64_t k = 0; k < run.count; ++k) {
                const int64_t y = k / run.cols, x = k % run.cols, t = i + k;
                out->mrope[size_t(t)] = int32_t(p);
                out->mrope[size_t(n + t)] = int32_t(p + y);
                out->mrope[size_t(2 * n + t)] = int32_t(p + x);
                max_pos = std::max(max_pos, p + std::max(y, x));
            }
            p += std::max(run.rows, run.cols);
            i += run.count;
            continue;
        }
        for (int a = 0; a < 3; ++a) out->mrope[size_t(a * n + i)] = int32_t(p);
        max_pos = std::max(max_pos, p);
        ++p;
        ++i;
    }
    out->rope_delta = max_pos + 1 - n;
    return out;
}

std::vector<int32_t> media_cache_tokens(const std::vector<int32_t>& prompt,
                                        const SequenceMedia& media) {
    std::vector<int32_t> keyed = prompt;
    for (const MediaRun& run : media.runs)
        for (int64_t k = 0; k < run.count; ++k) {
            const uint64_t h = mix64(media.keys[size_t(run.media)] ^ uint64_t(run.embed_begin + k));
            keyed[size_t(run.begin + k)] = -1 - int32_t(h & 0x7fffffff);
        }
    return keyed;
}

int32_t rope_position(const SequenceMedia* media, int64_t i, int axis) {
    if (!media) return int32_t(i);
    if (i < media->prompt_length) return media->mrope[size_t(axis * media->prompt_length + i)];
    return int32_t(i + media->rope_delta);
}

bool has_media_rows(const SequenceMedia* media, int64_t begin, int64_t end) {
    if (!media) return false;
    for (const MediaRun& run : media->runs)
        if (run.begin < end && begin < run.begin + run.count) return true;
    return false;
}

std::shared_ptr<Tensor> MediaEncoderCache::find(uint64_t key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    ++hits_;
    return it->second.embeds;
}

void MediaEncoderCache::insert(uint64_t key, std::shared_ptr<Tensor> embeds) {
    if (budget_ <= 0 || entries_.count(key)) return;
    const int64_t size = embeds->view().nbytes();
    if (size > budget_) return;
    lru_.push_front(key);
    entries_.emplace(key, Entry{std::move(embeds), lru_.begin()});
    bytes_ += size;
    while (bytes_ > budget_) {
        const uint64_t old = lru_.back();
        lru_.pop_back();
        bytes_ -= entries_.at(old).embeds->view().nbytes();
        entries_.erase(old);
    }
}

void encode_media(const ops::ExecContext& ctx, model::Qwen35Model& model,
                  MediaEncoderCache& cache, const std::vector<MediaNeed>& needs) {
    const io::ModelConfig& c = model.config();
    // One encode per content key not cached yet, and every embeds slot that waits for it (the
    // same image in several requests, or several runs of one video).
    struct Pending {
        uint64_t key = 0;
        model::MediaGrid grid;
        const std::vector<float>* pixels = nullptr;
        std::vector<std::shared_ptr<Tensor>*> slots;
    };
    std::vector<Pending> pending;
    std::unordered_map<uint64_t, size_t> by_key;
    for (const MediaNeed& need : needs) {
        SequenceMedia* media = need.seq->media.get();
        if (!media) continue;
        for (const MediaRun& run : media->runs) {
            if (!(run.begin < need.end && need.begin < run.begin + run.count)) continue;
            std::shared_ptr<Tensor>& slot = media->embeds[size_t(run.media)];
            if (slot) continue;
            const uint64_t key = media->keys[size_t(run.media)];
            if ((slot = cache.find(key))) continue;
            auto [it, added] = by_key.emplace(key, pending.size());
            if (added)
                pending.push_back({key, media->grids[size_t(run.media)],
                                   need.seq->request.media[size_t(run.media)].pixels.get(), {}});
            pending[it->second].slots.push_back(&slot);
        }
    }
    Allocator& a = ops::device_allocator(ctx.device);
    const int64_t P = c.vision.patch_values(), merge = c.vision.spatial_merge_size;
    // Tower calls of at most kMaxMediaPatches patches, media in order.
    for (size_t first = 0; first < pending.size();) {
        size_t last = first;
        int64_t N = 0, merged = 0;
        std::vector<model::MediaGrid> grids;
        while (last < pending.size() &&
               (last == first || N + pending[last].grid.patches() <= kMaxMediaPatches)) {
            grids.push_back(pending[last].grid);
            N += pending[last].grid.patches();
            merged += pending[last].grid.merged(merge);
            ++last;
        }
        Tensor px = Tensor::empty(a, ctx.dtype, {N, P});
        for (size_t i = first, row = 0; i < last; ++i) { // each medium's pixels into its rows
            const int64_t n = pending[i].grid.patches();
            ops::upload(ctx,
                        TensorView::contiguous(const_cast<float*>(pending[i].pixels->data()),
                                               DType::F32, Device::cpu(), {n * P}),
                        px.view().narrow(0, int64_t(row), n).reshape({n * P}));
            row += size_t(n);
        }
        Tensor out = Tensor::empty(a, ctx.dtype, {merged, c.hidden_size});
        model.vision().encode(ctx, grids, px.view(), out.view());
        int64_t row = 0;
        for (size_t i = first; i < last; ++i) {
            const int64_t n = pending[i].grid.merged(merge);
            auto own = std::make_shared<Tensor>(Tensor::empty(a, ctx.dtype, {n, c.hidden_size}));
            ops::copy(ctx, out.view().narrow(0, row, n), own->view());
            row += n;
            for (std::shared_ptr<Tensor>* slot : pending[i].slots) *slot = own;
            cache.insert(pending[i].key, own);
        }
        first = last;
    }
}

void append_media_rows(const SequenceMedia& media, int64_t begin, int64_t end, int64_t row0,
                       std::vector<model::ForwardBatch::MediaRows>& out) {
    for (const MediaRun& run : media.runs) {
        const int64_t lo = std::max(begin, run.begin), hi = std::min(end, run.begin + run.count);
        if (lo >= hi) continue;
        const std::shared_ptr<Tensor>& e = media.embeds[size_t(run.media)];
        require(e && e->defined(), "internal: medium ", run.media, " was not encoded");
        out.push_back({row0 + (lo - begin),
                       e->view().narrow(0, run.embed_begin + (lo - run.begin), hi - lo)});
    }
}

} // namespace ninfer::runtime
