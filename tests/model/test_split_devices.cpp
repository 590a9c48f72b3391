// The seed's --devices split (EngineOptions::devices, model::MlpPlacement) on the CPU: with the
// post-attention blocks on a second and a third "device" (CPU contexts with their own scratch;
// the residual rows copied there and back around every block), greedy output and logprobs equal
// one device's exactly, for every fixture (dense and MoE); batched, preempted and MTP-speculative
// runs of the split equal its solo / plain runs within the schedule tolerance (FP64 reference
// ops), as one device's do; and the placement follows the planner's layer runs. On CUDA the same code runs the blocks on
// other GPUs (or a second stream of one: tests/cuda/test_cuda_split_devices.cpp).
#include <string>
#include <vector>

#include "model/speculative_exactness.h"
#include "runtime/placement.h"
#include "runtime/route_selection.h"

namespace ninfer::test {
namespace {

const Comparison kExactCpu{0.0, 0};

// The split with the FP64 reference ops, for the checks whose two runs schedule rows differently
// (batched, preempted, speculative): equal to the schedule tolerance, as in one device's tests.
EngineOptions split_reference() {
    EngineOptions o;
    o.cpu_reference = true;
    o.devices = "cpu,cpu";
    return o;
}

class SplitDevices : public ::testing::TestWithParam<Fixture> {};

TEST_P(SplitDevices, GreedyOutputEqualsOneDevice) {
    const Fixture& f = GetParam();
    EngineOptions one;
    one.model_dir = f.dir;
    Engine single(one);
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    const Generated want = run_one(single, greedy_request(prompt, 24));
    for (const char* devices : {"cpu,cpu", "cpu,cpu,cpu"}) {
        EngineOptions o = one;
        o.devices = devices;
        Engine split(o);
        expect_same_output(run_one(split, greedy_request(prompt, 24)).tokens, want.tokens,
                           kExactCpu, f.name + " --devices " + devices);
    }
}

TEST_P(SplitDevices, BatchedAndPreemptedEqualSoloRuns) {
    check_batching_and_preemption(split_reference(), GetParam(), {kLogprobScheduleAbs, 0});
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SplitDevices, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(SplitDevicesMtp, SpeculationEqualsPlainDecoding) {
    for (const Fixture& f : mtp_fixtures()) {
        Speculation sp;
        sp.alone_ks = {1, 3, 0};
        check_mtp_greedy_alone(split_reference(), f, {kLogprobScheduleAbs, 0}, sp);
    }
}

TEST(SplitDevicesLayout, LayerRunsAndBadLists) {
    EXPECT_EQ(runtime::split_layer_devices(4, 1), (std::vector<int>{0, 0, 0, 0}));
    EXPECT_EQ(runtime::split_layer_devices(5, 2), (std::vector<int>{0, 0, 1, 1, 1}));
    EXPECT_EQ(runtime::split_layer_devices(40, 3)[12], 0); // layers 0..12, 13..25, 26..39
    EXPECT_EQ(runtime::split_layer_devices(40, 3)[13], 1);
    EXPECT_EQ(runtime::split_layer_devices(40, 3)[39], 2);
    EXPECT_THROW(runtime::split_layer_devices(2, 3), Error);
    const std::vector<Device> d = runtime::parse_device_list("0,1");
    EXPECT_EQ(d, (std::vector<Device>{Device::cuda(0), Device::cuda(1)}));
    for (const char* bad : {"cpu", "cpu,cuda:0", "cuda:0,", "gpu0,gpu1", ""}) {
        EXPECT_THROW(runtime::parse_device_list(bad), Error) << bad;
    }
    // A --device that names another first device than --devices.
    EngineOptions o;
    o.device = "cuda:1";
    o.devices = "cuda:0,cuda:1";
    try {
        Engine e(o);
        FAIL() << "engine started";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("name different first devices"), std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace ninfer::test
