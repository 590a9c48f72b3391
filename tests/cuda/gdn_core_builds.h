// The fused GDN decode kernel's builds (ops::cuda::gdn_core_variant, chosen by environment
// switches read at every call) for the CUDA tests that must pass on each of them.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::test {

// {blocks an SM, state read before the PDL wait, column blocks}: the row-group blocks in all four
// builds, the column blocks in both.
inline const std::vector<ops::cuda::GdnCoreVariant> kGdnCoreBuilds = {
    {1, false, false}, {2, false, false}, {1, true, false},
    {2, true, false},  {1, false, true},  {1, true, true}};

inline std::string gdn_core_build_name(const ops::cuda::GdnCoreVariant& v) {
    return std::string(v.columns ? "columns" : "rows x" + std::to_string(v.blocks_per_sm)) +
           (v.early_state ? ", early state" : "");
}

// Selects a build for its lifetime (the switches' previous values come back after it).
class ScopedGdnCoreBuild {
public:
    explicit ScopedGdnCoreBuild(const ops::cuda::GdnCoreVariant& v) {
        setenv("NINFER_GDN_CORE_BLOCKS", v.blocks_per_sm == 2 ? "2" : "1", 1);
        setenv("NINFER_GDN_CORE_EARLY_STATE", v.early_state ? "1" : "0", 1);
        setenv("NINFER_GDN_CORE_COLUMNS", v.columns ? "1" : "0", 1);
    }

private:
    ScopedEnv blocks_{"NINFER_GDN_CORE_BLOCKS"}, early_{"NINFER_GDN_CORE_EARLY_STATE"},
        columns_{"NINFER_GDN_CORE_COLUMNS"};
};

} // namespace ninfer::test
