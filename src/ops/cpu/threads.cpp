#include "ops/cpu/threads.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ops/exec_context.h"

namespace ninfer::ops {
namespace {

std::string_view trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

// A whole decimal number filling `s`; false otherwise.
bool parse_int(std::string_view s, int64_t& out) {
    s = trim(s);
    if (s.empty()) return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

// ceil(quota / period) in whole CPUs, at least 1; 0 for "no limit" or nonsense.
int quota_cpus(int64_t quota, int64_t period) {
    if (quota <= 0 || period <= 0) return 0;
    const int64_t cpus = (quota + period - 1) / period;
    return int(std::clamp<int64_t>(cpus, 1, 1 << 20));
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The smallest CPU limit on the path from the process's cgroup up to the root of the hierarchy
// mounted at `root` (a parent's limit binds its children too); 0 when none.
template <typename LimitAt>
int limit_along(const std::string& root, std::string cgroup, LimitAt limit_at) {
    int best = 0;
    for (;;) {
        const int here = limit_at(root + cgroup);
        if (here > 0) best = best > 0 ? std::min(best, here) : here;
        if (cgroup.empty() || cgroup == "/") break;
        const auto slash = cgroup.find_last_of('/');
        cgroup =
            slash == std::string::npos || slash == 0 ? std::string("/") : cgroup.substr(0, slash);
    }
    return best;
}

// The cgroup CPU limit of this process: v2 (unified, "0::/path") or v1 (the "cpu" controller).
// Inside a container the process's own cgroup is usually the mount's root, which the walk
// reaches too.
int process_cgroup_cpu_limit() {
    std::istringstream lines(read_file("/proc/self/cgroup"));
    int best = 0;
    auto take = [&](int v) {
        if (v > 0) best = best > 0 ? std::min(best, v) : v;
    };
    for (std::string line; std::getline(lines, line);) {
        // hierarchy-ID:controller-list:path
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        const std::string path = line.substr(b + 1);
        if (controllers.empty()) {
            take(limit_along("/sys/fs/cgroup", path, [](const std::string& dir) {
                return cgroup_v2_cpu_limit(read_file(dir + "/cpu.max"));
            }));
        } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
            for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
                take(limit_along(mount, path, [](const std::string& dir) {
                    return cgroup_v1_cpu_limit(read_file(dir + "/cpu.cfs_quota_us"),
                                               read_file(dir + "/cpu.cfs_period_us"));
                }));
        }
    }
    // Containers that hide /proc/self/cgroup's path: the mount's root files.
    take(cgroup_v2_cpu_limit(read_file("/sys/fs/cgroup/cpu.max")));
    return best;
}

int affinity_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

} // namespace

int cgroup_v2_cpu_limit(std::string_view cpu_max) {
    cpu_max = trim(cpu_max);
    const auto space = cpu_max.find_first_of(" \t");
    const std::string_view quota = cpu_max.substr(0, space);
    if (quota == "max" || quota.empty()) return 0;
    int64_t q = 0, period = 100000; // the period is optional in writes; the kernel's default
    if (!parse_int(quota, q)) return 0;
    if (space != std::string_view::npos && !parse_int(cpu_max.substr(space), period)) return 0;
    return quota_cpus(q, period);
}

int cgroup_v1_cpu_limit(std::string_view quota_us, std::string_view period_us) {
    int64_t q = 0, period = 0;
    if (!parse_int(quota_us, q) || !parse_int(period_us, period)) return 0;
    return quota_cpus(q, period);
}

int default_thread_count(int affinity_cpus, int quota_cpus, int online_cpus) {
    int usable = affinity_cpus > 0 ? affinity_cpus : std::max(online_cpus, 1);
    if (quota_cpus > 0) usable = std::min(usable, quota_cpus);
    // OpenMP loops split work evenly and wait for the slowest thread, so one core shared with
    // another process slows every parallel region down to that thread's pace, and with passive
    // waits each region also pays a wake-up on the contended core: on 2 cores, demo decode fell
    // from 440 to 125 tok/s with one busy core, against 393 with one thread. Given the whole
    // machine, something else always runs somewhere (the shell, the server's HTTP threads, the
    // OS), so one core stays free for it: that costs at most 1/n of the peak (12% at n = 2),
    // where sharing a core costs up to 70%. CPUs reserved for this process (taskset, a cgroup
    // quota below the machine) are all used. (llama.cpp defaults to the physical cores.)
    if (usable >= 2 && usable >= online_cpus) --usable;
    return std::max(usable, 1);
}

int default_cpu_threads() {
    static const int n = [] {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        return default_thread_count(affinity_cpu_count(), process_cgroup_cpu_limit(),
                                    online > 0 ? int(online) : 1);
    }();
    return n;
}

int cpu_threads() {
    return omp_get_max_threads();
}

void set_cpu_threads(int n) {
    if (n <= 0) {
        // OMP_NUM_THREADS set by the user: OpenMP (and OpenBLAS) already took it.
        if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) return;
        n = default_cpu_threads();
    }
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

} // namespace ninfer::ops
