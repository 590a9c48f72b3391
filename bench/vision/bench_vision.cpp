// The vision tower's encode throughput (CUDA): random weights of a checkpoint config's exact
// vision shapes (the text model shrunk to one layer, which the tower does not use), images of the
// given sizes preprocessed to their patch grids (smart_resize to multiples of 32 pixels), and per
// size: latency, TFLOP/s and the fraction of the bf16 GEMM rate measured in the same run.
//   bench_vision CONFIG.json [WxH[xN] ...]   (default 1024x1024 448x448x8; N images per call)
// One JSON object per line on stdout.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/hf_config.h"
#include "model/qwen3_5.h"
#include "model/vision.h"
#include "ops/memory.h"

namespace {

using namespace ninfer;

struct Case {
    int64_t width = 0, height = 0, count = 1;
};

Case parse_case(const std::string& s) {
    Case c;
    if (std::sscanf(s.c_str(), "%ldx%ldx%ld", &c.width, &c.height, &c.count) < 2)
        fail_invalid("bad size '", s, "' (WxH or WxHxN)");
    return c;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char** argv) {
    require(argc >= 2, "usage: bench_vision CONFIG.json [WxH[xN] ...]");
    io::ModelConfig c = io::load_hf_config(argv[1]);
    require(c.has_vision, argv[1], " has no vision_config");
    c.num_layers = 1; // the tower is what is measured; keep the text weights small
    c.layer_types = {io::LayerKind::FullAttention};
    c.vocab_size = 1024;
    c.mtp_num_hidden_layers = 0;
    std::vector<Case> cases;
    for (int i = 2; i < argc; ++i) cases.push_back(parse_case(argv[i]));
    if (cases.empty()) cases = {{1024, 1024, 1}, {448, 448, 8}};
    ops::ExecContext ctx = ops::ExecContext::cuda(0, DType::BF16);
    ops::bind_device(ctx);
    const double gemm = ops::measure_gemm_flops(ctx, 8192, 5);
    auto m = model::Qwen35Model::random(c, ctx, 7);
    const io::VisionConfig& v = c.vision;
    const int64_t factor = v.patch_size * v.spatial_merge_size;
    for (const Case& k : cases) {
        // A picture of exactly a multiple of the factor keeps its size under smart_resize.
        const int64_t gh = (k.height / factor) * v.spatial_merge_size,
                      gw = (k.width / factor) * v.spatial_merge_size;
        std::vector<model::MediaGrid> grids(size_t(k.count), model::MediaGrid{1, gh, gw});
        int64_t N = 0, merged = 0;
        for (const auto& g : grids) {
            N += g.patches();
            merged += g.merged(v.spatial_merge_size);
        }
        Allocator& a = ops::device_allocator(ctx.device);
        Tensor px = Tensor::empty(a, DType::BF16, {N, v.patch_values()});
        ops::fill_random(ctx, px, 11, 0.0f, 0.5f);
        Tensor out = Tensor::empty(a, DType::BF16, {merged, c.hidden_size});
        for (int w = 0; w < 2; ++w) m->vision().encode(ctx, grids, px.view(), out.view()); // warm
        ops::synchronize(ctx);
        const int reps = 10;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) m->vision().encode(ctx, grids, px.view(), out.view());
        ops::synchronize(ctx);
        const double s = seconds_since(t0) / reps;
        const double flops = model::VisionEncoder::flops(c, grids);
        nlohmann::json j = {{"bench", "vision_encode"},
                            {"images", k.count},
                            {"pixels", {gw * v.patch_size, gh * v.patch_size}},
                            {"patches", N},
                            {"merged_tokens", merged},
                            {"latency_s", s},
                            {"tflops", flops / s / 1e12},
                            {"gemm_tflops", gemm / 1e12},
                            {"gemm_fraction", flops / s / gemm},
                            {"tokens_per_s", double(merged) / s}};
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_vision: %s\n", e.what());
        return 1;
    }
}
