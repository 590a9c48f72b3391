// The --devices split on CUDA (EngineOptions::devices, model::MlpPlacement; label cuda), on one
// GPU as "cuda:0,cuda:0": the post-attention blocks run on a second stream with their own
// scratch, the residual rows copied across and the streams ordered by events (ops::copy_across,
// ops::stream_wait), eagerly and inside the decode graphs (a fork and join per layer). Greedy
// ids and logprobs equal one stream's bit for bit (the same kernels in the same order on the
// same data), for every fixture, with and without graphs, and with MTP speculation.
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/speculative_exactness.h"

namespace ninfer::test {
namespace {

const Comparison kBitExact{0.0, 0};

class CudaSplitDevices : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaSplitDevices, SecondStreamEqualsOneStream) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    for (bool graphs : {false, true}) {
        EngineOptions one = cuda_engine_options("bf16");
        one.model_dir = f.dir;
        one.cuda_graphs = graphs;
        Engine single(one);
        const Generated want = run_one(single, greedy_request(prompt, 24));
        EngineOptions o = one;
        o.devices = "cuda:0,cuda:0";
        Engine split(o);
        expect_same_output(run_one(split, greedy_request(prompt, 24)).tokens, want.tokens,
                           kBitExact, f.name + (graphs ? " graphs" : " eager"));
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSplitDevices, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(CudaSplitDevicesMtp, SpeculationKeepsItsOutput) {
    for (const Fixture& f : mtp_fixtures()) {
        EngineOptions o = cuda_engine_options("f32");
        o.devices = "cuda:0,cuda:0";
        Speculation sp;
        sp.alone_ks = {1, 3, 0};
        check_mtp_greedy_alone(o, f, {kLogprobScheduleAbs, 0}, sp);
    }
}

} // namespace
} // namespace ninfer::test
