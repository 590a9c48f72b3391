#include "runtime/route_selection.h"

#include <algorithm>

#include "core/error.h"
#include "ops/cuda/device_caps.h"

namespace ninfer::runtime {

Device parse_device(const std::string& name) {
    if (name == "cpu") return Device::cpu();
    if (name == "cuda") return Device::cuda(0);
    if (name.rfind("cuda:", 0) == 0) {
        const std::string index = name.substr(5);
        require(!index.empty() && index.size() < 4 &&
                    index.find_first_not_of("0123456789") == std::string::npos,
                "device '", name, "': expected cuda:N");
        return Device::cuda(std::stoi(index));
    }
    fail_invalid("unknown device '", name, "' (expected cpu, cuda or cuda:N)");
}

std::vector<Device> parse_device_list(const std::string& list) {
    std::vector<Device> out;
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t end = std::min(list.find(',', begin), list.size());
        const std::string name = list.substr(begin, end - begin);
        const bool index = !name.empty() && name.size() < 4 &&
                           name.find_first_not_of("0123456789") == std::string::npos;
        out.push_back(index ? Device::cuda(std::stoi(name)) : parse_device(name));
        begin = end + 1;
    }
    require(out.size() >= 2, "--devices '", list, "': at least two devices (one is --device)");
    for (const Device& d : out)
        require(d.type == out.front().type, "--devices '", list,
                "': CPU and CUDA devices do not mix");
    return out;
}

ops::RouteDevice route_device(Device device) {
    return {ops::cuda::device_name(device.index), ops::cuda::device_caps(device.index).sm_count,
            ops::cuda::cuda_runtime_version()};
}

ops::RouteTable select_route_table(const std::string& choice, Device device) {
    if (device.is_cpu()) return ops::resolve_route_table(choice, nullptr);
    const ops::RouteDevice d = route_device(device);
    return ops::resolve_route_table(choice, &d);
}

} // namespace ninfer::runtime
