// Multimodal prompts on CUDA (label cuda): the vision fixtures' greedy output in F32 equals HF
// token for token (images, a video, chunked prefill through the placeholders, batched
// requests); the bf16 tower tracks the CPU's; a real-size tower runs on random weights.
#include <cmath>

#include "cuda/cuda_test_util.h"
#include "model/vision_fixture.h"

namespace ninfer::test {
namespace {

// bf16 activations through a few ViT blocks and the merger: relative L2 distance to the f32 CPU
// tower (bf16 rounds each stored activation by 2^-9; a dozen GEMMs in sequence stay well below).
inline constexpr Tolerance kBf16Tower{"bf16_tower", 2e-2, 1e-1};

class CudaVision : public ::testing::TestWithParam<std::string> {};

void expect_greedy(Engine& engine, const VisionFixture& f) {
    for (const VisionCase& c : f.cases) {
        auto tokens = generate(engine, vision_request(f, c));
        ASSERT_EQ(tokens.size(), c.steps.size()) << c.name;
        for (size_t i = 0; i < tokens.size(); ++i) {
            ASSERT_EQ(tokens[i].id, c.steps[i].id) << f.name << " " << c.name << " step " << i;
            EXPECT_NEAR(tokens[i].logprob, c.steps[i].logprob, kLogprobVsHfAbs);
        }
    }
}

TEST_P(CudaVision, F32GreedyEqualsHf) {
    const VisionFixture f = load_vision_fixture(GetParam());
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    Engine engine(o);
    expect_greedy(engine, f);
}

TEST_P(CudaVision, F32ChunkedPrefillEqualsHf) {
    const VisionFixture f = load_vision_fixture(GetParam());
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    o.prefill_chunk = 5;
    Engine engine(o);
    expect_greedy(engine, f);
}

TEST_P(CudaVision, F32BatchedRequestsEqualHf) {
    const VisionFixture f = load_vision_fixture(GetParam());
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    Engine engine(o);
    std::vector<GenerationRequest> requests;
    for (const VisionCase& c : f.cases) requests.push_back(vision_request(f, c));
    auto streams = engine.submit_all(requests);
    for (size_t i = 0; i < streams.size(); ++i) {
        std::vector<int32_t> ids, want;
        RequestUpdate u;
        while (streams[i].next(u))
            for (const auto& t : u.tokens) ids.push_back(t.id);
        for (const auto& s : f.cases[i].steps) want.push_back(s.id);
        EXPECT_EQ(ids, want) << f.cases[i].name;
    }
}

// The tower's output for every medium in one call, on a context.
std::vector<float> tower(const ops::ExecContext& ctx, const VisionFixture& f) {
    auto m = model::Qwen35Model::load(f.dir, ctx);
    const io::ModelConfig& c = m->config();
    std::vector<model::MediaGrid> grids;
    std::vector<float> px;
    int64_t merged = 0;
    for (const auto& [name, medium] : f.media) {
        grids.push_back(medium.grid);
        px.insert(px.end(), medium.pixels->begin(), medium.pixels->end());
        merged += medium.grid.merged(c.vision.spatial_merge_size);
    }
    const int64_t P = c.vision.patch_values(), N = int64_t(px.size()) / P;
    Allocator& a = ops::device_allocator(ctx.device);
    Tensor pixels = Tensor::empty(a, ctx.dtype, {N, P});
    ops::upload(ctx, TensorView::contiguous(px.data(), DType::F32, Device::cpu(), {N, P}),
                pixels.view());
    Tensor out = Tensor::empty(a, ctx.dtype, {merged, c.hidden_size});
    m->vision().encode(ctx, grids, pixels.view(), out.view());
    std::vector<float> host(size_t(merged * c.hidden_size));
    ops::download(ctx, out.view(),
                  TensorView::contiguous(host.data(), DType::F32, Device::cpu(),
                                         {merged, c.hidden_size}));
    ops::synchronize(ctx);
    return host;
}

TEST_P(CudaVision, Bf16TowerTracksTheCpu) {
    const VisionFixture f = load_vision_fixture(GetParam());
    std::vector<float> cpu = tower(ops::ExecContext::cpu(), f);
    std::vector<float> gpu = tower(cuda_ctx(DType::BF16), f);
    const int64_t n = int64_t(cpu.size());
    EXPECT_TRUE(near(TensorView::contiguous(gpu.data(), DType::F32, Device::cpu(), {n}),
                     TensorView::contiguous(cpu.data(), DType::F32, Device::cpu(), {n}),
                     kBf16Tower))
        << f.name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaVision, ::testing::ValuesIn(vision_fixture_names()),
                         [](const auto& param_info) { return param_info.param; });

} // namespace
} // namespace ninfer::test
