// Tensor parallelism on CUDA (EngineOptions::tensor_parallel; label cuda), on one GPU as
// "cuda:0,cuda:0": two ranks on two streams of one device, each with its shard of the weights and
// its own KV and GDN pools, the host-staged collective between them (NCCL takes one rank a GPU).
// In f32 the ranks' partial sums differ from one GPU's GEMM only in rounding: greedy ids equal
// and logprobs within the schedule tolerance, for every fixture; batching, preemption and the
// prefix cache keep their guarantees under TP. On a host with two GPUs or more the same checks
// run on cuda:0,cuda:1, with NCCL when the build has it (the machine decides: this test names
// what it ran).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "model/serving_exactness.h"
#include "ops/collective.h"

namespace ninfer::test {
namespace {

const Comparison kParallelF32{kLogprobScheduleAbs, 0};

int cuda_device_count() {
    int n = 0;
    EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
    return n;
}

EngineOptions parallel_options(const Fixture& f, const std::string& devices,
                               const std::string& collective) {
    EngineOptions o = cuda_engine_options("f32");
    o.model_dir = f.dir;
    o.tensor_parallel = 2;
    o.devices = devices;
    o.collective = collective;
    return o;
}

class CudaTensorParallel : public ::testing::TestWithParam<Fixture> {};

TEST_P(CudaTensorParallel, TwoStreamsOfOneGpuEqualOneRank) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    EngineOptions one = cuda_engine_options("f32");
    one.model_dir = f.dir;
    Engine single(one);
    const Generated want = run_one(single, greedy_request(prompt, 24));
    Engine parallel(parallel_options(f, "cuda:0,cuda:0", "host"));
    EXPECT_EQ(parallel.model_info().collective, "host");
    expect_same_output(run_one(parallel, greedy_request(prompt, 24)).tokens, want.tokens,
                       kParallelF32, f.name + " tp=2 on one GPU");
}

// The device collective: the ranks' kernels read each other's parts, streams ordered by events,
// so TP decode steps run as CUDA graphs (bf16, where the graphs matter; logprobs as two
// schedules of one bf16 engine may differ).
TEST_P(CudaTensorParallel, DeviceCollectiveWithGraphsEqualsHost) {
    const Fixture& f = GetParam();
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    for (bool graphs : {false, true}) {
        EngineOptions host = parallel_options(f, "cuda:0,cuda:0", "host");
        host.dtype = "bf16";
        host.cuda_graphs = graphs;
        Engine by_host(host);
        const Generated want = run_one(by_host, greedy_request(prompt, 24));
        EngineOptions device = host;
        device.collective = "device";
        Engine by_device(device);
        EXPECT_EQ(by_device.model_info().collective, "device");
        // Both collectives sum in f32 in rank order and round once: the same bits.
        expect_same_output(run_one(by_device, greedy_request(prompt, 24)).tokens, want.tokens,
                           {0.0, 0}, f.name + (graphs ? " graphs" : " eager"));
    }
    check_batching_and_preemption(parallel_options(f, "cuda:0,cuda:0", "device"), f,
                                  kParallelF32);
}

TEST_P(CudaTensorParallel, BatchingPreemptionAndPrefixCacheOnOneGpu) {
    const Fixture& f = GetParam();
    check_batching_and_preemption(parallel_options(f, "cuda:0,cuda:0", "host"), f, kParallelF32);
    check_prefix_cache_exactness(parallel_options(f, "cuda:0,cuda:0", "host"), f, kParallelF32);
}

// Two GPUs: the real layout, with NCCL where built (else the host collective). One GPU runs
// the check above instead; the test prints which it ran.
TEST_P(CudaTensorParallel, TwoGpusEqualOneGpu) {
    const Fixture& f = GetParam();
    if (cuda_device_count() < 2) {
        std::printf("CudaTensorParallel.TwoGpusEqualOneGpu: one GPU here: the two-stream tests "
                    "cover it\n");
        return;
    }
    const std::string collective = ops::nccl_available() ? "nccl" : "host";
    const std::vector<int32_t> prompt = prefix_of(long_prompt(f, 60), 60);
    EngineOptions one = cuda_engine_options("f32");
    one.model_dir = f.dir;
    Engine single(one);
    const Generated want = run_one(single, greedy_request(prompt, 24));
    Engine parallel(parallel_options(f, "cuda:0,cuda:1", collective));
    EXPECT_EQ(parallel.model_info().collective, collective);
    expect_same_output(run_one(parallel, greedy_request(prompt, 24)).tokens, want.tokens,
                       kParallelF32, f.name + " tp=2 on two GPUs, " + collective);
    check_batching_and_preemption(parallel_options(f, "cuda:0,cuda:1", collective), f,
                                  kParallelF32);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaTensorParallel, ::testing::ValuesIn(load_fixtures()),
                         [](const auto& param_info) { return param_info.param.name; });

} // namespace
} // namespace ninfer::test
