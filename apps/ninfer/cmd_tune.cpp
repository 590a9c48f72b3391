// ninfer tune: measures the kernel route tables of this GPU (runtime/route_tuner.h) and writes
// the table the engine puts in force at startup (ops/route_table.h), or shows the table in force.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "core/error.h"
#include "runtime/route_selection.h"
#include "runtime/route_tuner.h"

namespace ninfer::app {
namespace {

struct TuneOptions {
    std::string device = "cuda", out, show;
    int reps = 5;
    bool quick = false;
};

// Each decision's bands, one line each.
void print_table(const ops::RouteTable& t) {
    std::printf("route table: %s\n", t.source().c_str());
    for (const ops::RouteDecisionInfo& info : ops::route_catalog()) {
        std::string bands;
        int64_t first = 1;
        for (const ops::RouteBand& b : t.decision(info.id).bands) {
            bands += concat(bands.empty() ? "" : ", ", info.kernels[size_t(b.kernel)].name, " ",
                            first, b.last == ops::kRouteUnbounded ? std::string("+")
                                                                  : concat("-", b.last));
            first = b.last == ops::kRouteUnbounded ? b.last : b.last + 1;
        }
        std::printf("  %-20s %-30s %s\n", info.name.c_str(), info.domain.c_str(), bands.c_str());
    }
}

int tune(const TuneOptions& o) {
    const Device device = runtime::parse_device(o.device);
    if (!o.show.empty()) {
        print_table(runtime::select_route_table(o.show, device));
        return 0;
    }
    require(!device.is_cpu(), "ninfer tune: the route tables are CUDA's; pass --device cuda or "
                              "cuda:N");
    runtime::TuneOptions t;
    t.device = device;
    t.reps = o.reps;
    t.quick = o.quick;
    t.progress = [](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
    };
    const ops::RouteDevice key = runtime::route_device(device);
    std::fprintf(stderr, "ninfer tune: %s, %d SMs, CUDA %d\n", key.gpu.c_str(), key.sm_count,
                 key.cuda_version);
    const ops::RouteTable table =
        ops::RouteTable::from_measurements(key, runtime::measure_routes(t));
    std::string path = o.out;
    if (path.empty()) {
        const std::string dir = ops::route_cache_dir();
        require(!dir.empty(), "ninfer tune: no cache directory (set NINFER_CACHE_DIR, "
                              "XDG_CACHE_HOME or HOME), or pass --out FILE");
        path = ops::route_table_file(dir, key);
    }
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        require(bool(f), "ninfer tune: cannot write ", tmp);
        f << table.to_json();
        require(bool(f.flush()), "ninfer tune: cannot write ", tmp);
    }
    std::filesystem::rename(tmp, path); // a reader never sees half a table
    print_table(ops::RouteTable::parse(table.to_json(), path));
    std::printf("written: %s (the engine's --route-table auto finds it on this GPU)\n",
                path.c_str());
    return 0;
}

} // namespace

Action add_tune_command(CLI::App& app) {
    auto o = std::make_shared<TuneOptions>();
    app.add_option("--device", o->device,
                   "The GPU to measure: cuda or cuda:N (with --show, cpu too)");
    app.add_option("--out", o->out,
                   "Where to write the table (default: the cache file --route-table auto reads "
                   "for this GPU)");
    app.add_option("--reps", o->reps, "Timings per measurement; the median is kept")
        ->check(CLI::Range(1, 100));
    app.add_flag("--quick", o->quick, "A few values per decision (minutes become seconds)");
    app.add_option("--show", o->show,
                   "Print the table in force for --route-table SHOW (auto, builtin or a file) "
                   "on this device, and measure nothing");
    return [o] { return tune(*o); };
}

} // namespace ninfer::app
