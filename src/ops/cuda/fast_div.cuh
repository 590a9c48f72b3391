// Division by a divisor fixed at launch as a multiply-high, for the fused MoE decode route's
// scale lookups (moe_decode_fp8.cuh, moe_decode_grouped.cuh): a column's block or group.
#pragma once

#include <cstdint>

namespace ninfer::ops::cuda::moe_decode {

// n / d for 0 <= n < 2^31 and 2 <= d < 2^31 as __umulhi(n, m) >> (l - 1), l = ceil(log2 d),
// m = ceil(2^(31 + l) / d) < 2^32. Exact: with m d = 2^(31 + l) + e, 0 <= e < d <= 2^l, the
// error n e / (d 2^(31 + l)) of n m / 2^(31 + l) over n / d is below 1 / d for n < 2^31.
struct FastDiv {
    uint32_t mul = 0, shift = 0;
    static FastDiv of(uint32_t d) {
        uint32_t l = 0;
        while ((uint64_t(1) << l) < d) ++l;
        const uint64_t p = uint64_t(1) << (31 + l);
        return {uint32_t((p + d - 1) / d), l - 1};
    }
    __device__ __forceinline__ uint32_t operator()(uint32_t n) const {
        return __umulhi(n, mul) >> shift;
    }
};

} // namespace ninfer::ops::cuda::moe_decode
