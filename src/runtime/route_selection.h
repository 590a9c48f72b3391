// Which route table (ops/route_table.h) a device runs with: EngineOptions::route_table resolved
// for a device, shared by the engine (which puts it in force at startup), `ninfer info` (which
// names it) and `ninfer tune` (which writes the file `auto` finds).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/route_table.h"

namespace ninfer::runtime {

// "cpu", "cuda" (device 0) or "cuda:N" (EngineOptions::device).
Device parse_device(const std::string& name);
// A comma-separated list of parse_device names, or of bare indices ("0,1": cuda:0, cuda:1);
// EngineOptions::devices. At least two, all of one type.
std::vector<Device> parse_device_list(const std::string& list);

// The key of CUDA device `device`'s tables: its name, SM count and the CUDA runtime's version.
ops::RouteDevice route_device(Device device);

// The table `choice` ("auto", "builtin" or a file) names for `device`. The CPU runs no routed
// kernels: it takes the built-in table unless a file is named (which is then validated).
ops::RouteTable select_route_table(const std::string& choice, Device device);

} // namespace ninfer::runtime
