// The CPU backend's default thread count: the CPUs this process may use (its affinity mask and
// its cgroup's CPU quota), less one spare core when the process may use the whole machine. The
// parsers are pure functions so that tests can feed them sample cgroup files.
#pragma once

#include <string_view>

namespace ninfer::ops {

// CPUs granted by a cgroup v2 `cpu.max` file ("QUOTA PERIOD", or "max PERIOD"): the quota
// rounded up to whole CPUs, at least 1; 0 when there is no limit or the text does not parse.
int cgroup_v2_cpu_limit(std::string_view cpu_max);

// The same for cgroup v1: the contents of cpu.cfs_quota_us ("-1": no limit) and
// cpu.cfs_period_us.
int cgroup_v1_cpu_limit(std::string_view quota_us, std::string_view period_us);

// The default thread count from what the process may use: `affinity_cpus` (sched_getaffinity),
// `quota_cpus` (0: no cgroup limit) and `online_cpus` (every CPU of the machine). The usable
// count is the smaller of the first two; when that is the whole machine (nothing reserved the
// CPUs for this process) and it has 2 or more, one core stays free for the rest of the system.
int default_thread_count(int affinity_cpus, int quota_cpus, int online_cpus);

// default_thread_count() for this process: reads the affinity mask and the cgroup files
// (/proc/self/cgroup, /sys/fs/cgroup/...). Computed once.
int default_cpu_threads();

// The CPU backend's thread count for the calling thread (after set_cpu_threads).
int cpu_threads();

} // namespace ninfer::ops
