// Multimodal prompts against HF transformers (float64) on the tiny random checkpoints of
// tests/fixtures_vision: the tower's merged embeddings, and greedy ids with top-5 log-probs of
// prompts with images and a video, on the CPU fast and reference paths; chunked prefill through
// an image; the prefix cache keyed by image content; bad media rejected.
#include <algorithm>
#include <cmath>

#include "model/vision_fixture.h"

namespace ninfer::test {
namespace {

using model::MediaGrid;

class VisionParity : public ::testing::TestWithParam<std::string> {};

void check_tower(const VisionFixture& f, ops::CpuMode mode) {
    ops::ExecContext ctx;
    ctx.cpu_mode = mode;
    auto m = model::Qwen35Model::load(f.dir, ctx);
    ASSERT_TRUE(m->has_vision());
    const int64_t H = m->config().hidden_size, merge = m->config().vision.spatial_merge_size;
    // Each medium alone, then all of them in one call (one attention segment per frame).
    std::vector<MediaGrid> grids;
    std::vector<float> all;
    std::vector<double> expected_all;
    for (const auto& [name, medium] : f.media) {
        grids.push_back(medium.grid);
        all.insert(all.end(), medium.pixels->begin(), medium.pixels->end());
        expected_all.insert(expected_all.end(), medium.tower.begin(), medium.tower.end());
        const int64_t n = medium.grid.merged(merge);
        Tensor out = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {n, H});
        auto px = const_cast<float*>(medium.pixels->data());
        const int64_t P = m->config().vision.patch_values();
        m->vision().encode(ctx, {medium.grid},
                           TensorView::contiguous(px, DType::F32, Device::cpu(),
                                                  {medium.grid.patches(), P}),
                           out.view());
        Tensor ref = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {n, H});
        for (int64_t i = 0; i < n * H; ++i) ref.view().ptr<float>()[i] = float(medium.tower[size_t(i)]);
        EXPECT_TRUE(near(out.view(), ref.view(), kReductionF32)) << f.name << " " << name;
    }
    int64_t n = 0;
    for (const auto& g : grids) n += g.merged(merge);
    Tensor out = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {n, H});
    const int64_t P = m->config().vision.patch_values();
    m->vision().encode(ctx, grids,
                       TensorView::contiguous(all.data(), DType::F32, Device::cpu(),
                                              {int64_t(all.size()) / P, P}),
                       out.view());
    Tensor ref = Tensor::empty(ops::device_allocator(ctx.device), DType::F32, {n, H});
    for (int64_t i = 0; i < n * H; ++i) ref.view().ptr<float>()[i] = float(expected_all[size_t(i)]);
    EXPECT_TRUE(near(out.view(), ref.view(), kReductionF32)) << f.name << " batched";
}

TEST_P(VisionParity, TowerMatchesHf) {
    const VisionFixture f = load_vision_fixture(GetParam());
    check_tower(f, ops::CpuMode::Fast);
    check_tower(f, ops::CpuMode::Reference);
}

void expect_case(Engine& engine, const VisionFixture& f, const VisionCase& c,
                 const std::string& where) {
    auto tokens = generate(engine, vision_request(f, c));
    ASSERT_EQ(tokens.size(), c.steps.size()) << where;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string at = where + " step " + std::to_string(i);
        ASSERT_EQ(tokens[i].id, c.steps[i].id) << at;
        EXPECT_NEAR(tokens[i].logprob, c.steps[i].logprob, kLogprobVsHfAbs) << at;
        expect_top_logprobs_match(tokens[i], c.steps[i], at);
    }
}

void check_cases(const VisionFixture& f, EngineOptions o) {
    o.model_dir = f.dir;
    Engine engine(o);
    for (const VisionCase& c : f.cases) expect_case(engine, f, c, f.name + " " + c.name);
}

TEST_P(VisionParity, FastPathMatchesHf) {
    check_cases(load_vision_fixture(GetParam()), {});
}

TEST_P(VisionParity, ReferencePathMatchesHf) {
    EngineOptions o;
    o.cpu_reference = true;
    check_cases(load_vision_fixture(GetParam()), o);
}

// Tensor parallelism: rank 0's vision tower, its embeddings copied into every rank's rows.
TEST_P(VisionParity, TensorParallelMatchesHf) {
    EngineOptions o;
    o.tensor_parallel = 2;
    check_cases(load_vision_fixture(GetParam()), o);
}

TEST_P(VisionParity, ChunkedPrefillThroughImagesMatchesHf) {
    EngineOptions o;
    o.prefill_chunk = 5; // chunk ends fall inside every placeholder run
    check_cases(load_vision_fixture(GetParam()), o);
}

TEST_P(VisionParity, BatchedRequestsMatchHf) {
    const VisionFixture f = load_vision_fixture(GetParam());
    EngineOptions o;
    o.model_dir = f.dir;
    Engine engine(o);
    std::vector<GenerationRequest> requests;
    for (const VisionCase& c : f.cases) requests.push_back(vision_request(f, c));
    auto streams = engine.submit_all(requests);
    for (size_t i = 0; i < streams.size(); ++i) {
        std::vector<int32_t> ids;
        RequestUpdate u;
        while (streams[i].next(u))
            for (const auto& t : u.tokens) ids.push_back(t.id);
        std::vector<int32_t> want;
        for (const auto& s : f.cases[i].steps) want.push_back(s.id);
        EXPECT_EQ(ids, want) << f.name << " " << f.cases[i].name;
    }
}

// MTP speculation over multimodal prompts stays exact (the fixture with an MTP head).
TEST(VisionSpeculative, MtpDraftsKeepHfGreedy) {
    EngineOptions o;
    o.speculative = "mtp";
    o.draft_tokens = 3;
    check_cases(load_vision_fixture("moe_vision"), o);
    o.prefill_chunk = 5; // chunks that end right before, inside and after placeholder runs
    check_cases(load_vision_fixture("moe_vision"), o);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VisionParity, ::testing::ValuesIn(vision_fixture_names()),
                         [](const auto& param_info) { return param_info.param; });

// The prefix cache keys placeholders by image content: the same image again hits past it,
// another image of the same size does not, and both answers stay exact.
TEST(VisionPrefixCache, SameImageHitsAndAnotherImageDoesNot) {
    const VisionFixture f = load_vision_fixture("dense_vision");
    const VisionCase& c = f.cases[0]; // one_image: text, image_a, 60 text tokens
    EngineOptions o;
    o.model_dir = f.dir;
    o.kv_block_size = 4;
    Engine engine(o);
    RequestUpdate last;
    generate(engine, vision_request(f, c), &last);
    const int32_t image_at = c.media[0].offsets[0];
    // Same image: served from the cache beyond the placeholders.
    auto again = generate(engine, vision_request(f, c), &last);
    EXPECT_GT(last.timings.cached_tokens, image_at + 12) << "the same image should hit";
    std::vector<int32_t> want;
    for (const auto& s : c.steps) want.push_back(s.id);
    EXPECT_EQ(ids_of(again), want);
    // Another image with the same grid: at most the text before it is reused.
    GenerationRequest other = vision_request(f, c);
    auto px = std::make_shared<std::vector<float>>(*other.media[0].pixels);
    for (float& v : *px) v = -v;
    other.media[0].pixels = px;
    generate(engine, other, &last);
    EXPECT_LE(last.timings.cached_tokens, image_at) << "another image must not hit";
}

TEST(VisionRequests, BadMediaAreInvalidArguments) {
    const VisionFixture f = load_vision_fixture("dense_vision");
    EngineOptions o;
    o.model_dir = f.dir;
    Engine engine(o);
    const VisionCase& c = f.cases[0];
    auto expect_invalid = [&](GenerationRequest r, const char* what) {
        try {
            engine.submit(std::move(r));
            ADD_FAILURE() << what << ": accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << what << ": " << e.what();
        }
    };
    GenerationRequest r = vision_request(f, c);
    r.media[0].offsets[0] += 1; // the run no longer starts at the placeholders
    expect_invalid(r, "shifted run");
    r = vision_request(f, c);
    r.media.clear(); // placeholders without media
    expect_invalid(r, "no media");
    r = vision_request(f, c);
    r.media[0].grid_w = 6; // pixels do not match
    expect_invalid(r, "grid mismatch");
    r = vision_request(f, c);
    r.media[0].grid_h = 5; // not a multiple of the merge size
    expect_invalid(r, "odd grid");
    // A text-only checkpoint takes no media.
    EngineOptions text;
    text.model_dir = fixtures_dir() + "/moe_text_fused";
    Engine text_engine(text);
    try {
        text_engine.submit(vision_request(f, c));
        ADD_FAILURE() << "text model accepted media";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::InvalidArgument) << e.what();
    }
}

} // namespace
} // namespace ninfer::test
