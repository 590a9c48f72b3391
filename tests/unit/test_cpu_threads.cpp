// ops/cpu/threads.h: cgroup CPU quota files -> CPUs, and the default thread count.
#include <gtest/gtest.h>

#include "ops/cpu/threads.h"

namespace ninfer::ops {
namespace {

TEST(CgroupV2CpuMax, NoLimit) {
    EXPECT_EQ(cgroup_v2_cpu_limit("max 100000\n"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("max"), 0);
}

TEST(CgroupV2CpuMax, QuotaRoundsUpToWholeCpus) {
    EXPECT_EQ(cgroup_v2_cpu_limit("200000 100000\n"), 2);
    EXPECT_EQ(cgroup_v2_cpu_limit("150000 100000"), 2); // 1.5 CPUs: 2 threads, each throttled
    EXPECT_EQ(cgroup_v2_cpu_limit("50000 100000"), 1);  // half a CPU: still one thread
    EXPECT_EQ(cgroup_v2_cpu_limit("400000 50000"), 8);
    EXPECT_EQ(cgroup_v2_cpu_limit("  300000   100000  \n"), 3);
    EXPECT_EQ(cgroup_v2_cpu_limit("300000"), 3); // the period defaults to 100 ms
}

TEST(CgroupV2CpuMax, GarbageIsNoLimit) {
    EXPECT_EQ(cgroup_v2_cpu_limit(""), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("\n"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("abc 100000"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("100000 xyz"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("100000 0"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("-5 100000"), 0);
    EXPECT_EQ(cgroup_v2_cpu_limit("1.5 100000"), 0);
}

TEST(CgroupV1Cfs, QuotaAndPeriod) {
    EXPECT_EQ(cgroup_v1_cpu_limit("-1\n", "100000\n"), 0); // no limit
    EXPECT_EQ(cgroup_v1_cpu_limit("100000\n", "100000\n"), 1);
    EXPECT_EQ(cgroup_v1_cpu_limit("250000", "100000"), 3);
    EXPECT_EQ(cgroup_v1_cpu_limit("10000", "100000"), 1);
    EXPECT_EQ(cgroup_v1_cpu_limit("", "100000"), 0); // unreadable file
    EXPECT_EQ(cgroup_v1_cpu_limit("100000", ""), 0);
    EXPECT_EQ(cgroup_v1_cpu_limit("100000", "0"), 0);
}

TEST(DefaultThreadCount, WholeMachineKeepsACoreFree) {
    EXPECT_EQ(default_thread_count(16, 0, 16), 15);
    EXPECT_EQ(default_thread_count(4, 0, 4), 3);
    EXPECT_EQ(default_thread_count(2, 0, 2), 1);
    EXPECT_EQ(default_thread_count(1, 0, 1), 1);
}

TEST(DefaultThreadCount, ReservedCpusAreAllUsed) {
    EXPECT_EQ(default_thread_count(4, 0, 16), 4);    // taskset -c 0-3
    EXPECT_EQ(default_thread_count(16, 2, 16), 2);   // a 2-CPU quota (docker --cpus 2)
    EXPECT_EQ(default_thread_count(4, 8, 16), 4);    // the smaller of affinity and quota
    EXPECT_EQ(default_thread_count(16, 16, 16), 15); // a quota of the whole machine is none
    EXPECT_EQ(default_thread_count(1, 0, 8), 1);
}

TEST(DefaultThreadCount, UnknownAffinityFallsBackToOnlineCpus) {
    EXPECT_EQ(default_thread_count(0, 0, 8), 7);
    EXPECT_EQ(default_thread_count(0, 3, 8), 3);
    EXPECT_EQ(default_thread_count(0, 0, 0), 1);
}

TEST(DefaultThreadCount, ThisProcessGetsAtLeastOne) {
    EXPECT_GE(default_cpu_threads(), 1);
}

} // namespace
} // namespace ninfer::ops
