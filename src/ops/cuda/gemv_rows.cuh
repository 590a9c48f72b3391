// The row dispatch, reduction and store shared by the few-row GEMVs (linear_gemv.cu,
// linear_fp8.cu, linear_grouped.cu): each warp holds R per-lane partial sums, one per input
// row, of one output column.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/linear_gemv.h"

namespace ninfer::ops::cuda {

// Calls fn(std::integral_constant<int, R>{}) for R = rows, 1 <= rows <= kGemvMaxRows, so each
// row count runs a kernel with exactly R accumulators (and only those counts are compiled).
template <typename Fn, int... I>
void with_rows(int64_t rows, Fn&& fn, std::integer_sequence<int, I...>) {
    ((rows == I + 1 ? fn(std::integral_constant<int, I + 1>{}) : void()), ...);
}
template <typename Fn> void with_rows(int64_t rows, Fn&& fn) {
    with_rows(rows, fn, std::make_integer_sequence<int, int(kGemvMaxRows)>{});
}

// Reduces the R per-lane partial sums over the warp with a transposed butterfly: each exchange
// halves the values a lane holds (it keeps one half and sends its partner the other), so 8 rows
// take 4 + 2 + 1 + 2 = 9 shuffles instead of 8 x 5, and 1 row exactly warp_sum's 5. Returns the
// total of row `row` (set here); the lanes with the same row hold the same total, and the lanes
// with lane % (32 / P) == 0 (P: R rounded up to a power of two) hold rows 0..P-1 once each.
template <int R>
__device__ __forceinline__ float warp_sum_rows(const float (&acc)[R], int lane, int& row) {
    constexpr int P = R <= 1 ? 1 : R <= 2 ? 2 : R <= 4 ? 4 : 8;
    float v[P];
#pragma unroll
    for (int i = 0; i < P; ++i) v[i] = i < R ? acc[i] : 0.0f;
    row = 0;
#pragma unroll
    for (int m = P, off = 16; m > 1; m /= 2, off /= 2) {
        const bool upper = lane & off; // keeps v[m/2 .. m), the partner keeps v[0 .. m/2)
#pragma unroll
        for (int i = 0; i < m / 2; ++i) {
            const float send = upper ? v[i] : v[i + m / 2];
            const float keep = upper ? v[i + m / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
        if (upper) row += m / 2;
    }
#pragma unroll
    for (int off = 16 / P; off > 0; off /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
    return v[0];
}

// y[r, n] (+)= the warp's total for row r, r < R; y points at y[0, n].
template <int R, typename Y>
__device__ __forceinline__ void store_rows(const float (&acc)[R], int lane, Y* y, int64_t y_stride,
                                           bool accumulate) {
    constexpr int P = R <= 1 ? 1 : R <= 2 ? 2 : R <= 4 ? 4 : 8;
    int r = 0;
    const float total = warp_sum_rows(acc, lane, r);
    if (lane % (32 / P) != 0 || r >= R) return;
    Y* out = y + r * y_stride;
    *out = from_float<Y>(accumulate ? to_float(*out) + total : total);
}

} // namespace ninfer::ops::cuda
