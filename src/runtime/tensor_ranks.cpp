#include "runtime/tensor_ranks.h"

#include <string>

#include "core/error.h"
#include "ops/memory.h"

namespace ninfer::runtime {

std::vector<ops::ExecContext> TensorRanks::peers() const {
    if (contexts.size() <= 1) return {};
    return {contexts.begin() + 1, contexts.end()};
}

int TensorRanks::on_first_device() const {
    if (contexts.empty()) return 1;
    int n = 0;
    for (const ops::ExecContext& c : contexts) n += c.device == contexts[0].device;
    return n;
}

TensorRanks make_tensor_ranks(const ops::ExecContext& ctx, int ranks,
                              const std::vector<Device>& devices, const std::string& collective) {
    require(ranks >= 1, "--tensor-parallel must be >= 1, got ", ranks);
    require(collective == "auto" || collective == "host" || collective == "device" ||
                collective == "nccl",
            "unknown collective '", collective, "' (expected auto, host, device or nccl)");
    require(devices.empty() || int(devices.size()) == ranks, "--tensor-parallel ", ranks,
            " takes ", ranks, " devices, --devices lists ", devices.size());
    TensorRanks t;
    for (int r = 0; r < ranks; ++r) {
        ops::ExecContext c = ctx;
        if (!devices.empty())
            c.device = devices[size_t(r)];
        else if (!ctx.device.is_cpu())
            c.device = Device::cuda(ctx.device.index + r);
        if (r > 0) {
            if (!c.device.is_cpu()) // every pair: the device collective reads every rank's part
                for (const ops::ExecContext& earlier : t.contexts)
                    ops::enable_peer_access(earlier.device, c.device);
            t.streams.push_back(ops::create_stream(c.device));
            c.stream = t.streams.back().get();
        }
        t.contexts.push_back(c);
    }
    ops::bind_device(ctx); // create_stream made the other devices current
    const bool cuda = !ctx.device.is_cpu();
    // NCCL takes one rank a GPU: auto takes it only when no device repeats.
    bool own_devices = true;
    for (size_t r = 0; r < t.contexts.size(); ++r)
        for (size_t q = 0; q < r; ++q)
            own_devices = own_devices && t.contexts[q].device != t.contexts[r].device;
    const bool nccl = collective == "nccl" ||
                      (collective == "auto" && cuda && ops::nccl_available() && own_devices);
    require(!nccl || cuda, "--collective nccl: NCCL runs on CUDA devices, not the CPU");
    if (collective == "device") {
        require(cuda, "--collective device: CUDA devices, not the CPU (its ranks use host)");
    }
    t.collectives = collective == "device" ? ops::make_device_collectives(t.contexts)
                    : nccl                 ? ops::make_nccl_collectives(t.contexts)
                                           : ops::make_host_collectives(ranks);
    return t;
}

} // namespace ninfer::runtime
