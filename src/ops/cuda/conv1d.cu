// Implements ops/conv1d.h on CUDA: one thread per (sequence, V channels, chunk of 64 rows) walks
// its rows in order with the K-1 history values in registers (a long prefill spreads over rows as
// well as channels: one thread per channel walking 8192 rows took 6.3 ms on the H200).
// V = 16 bytes of channels (8 bf16, 4 f32) where the rows allow 16-byte loads and K = 4 (the
// Qwen models' width): one 2-byte load a row per thread moved 0.43 TB/s on an H100 (0.63 ms at
// C = T = 8192), far from the copy rate; otherwise V = 1, any K <= 9 (checked by the
// dispatcher). Each channel's arithmetic is the same on both, so their outputs are equal.
#include <algorithm>
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kMaxHistory = 8;    // K <= 9
constexpr int kQwenHistory = 3;   // K = 4
constexpr int kThreads = 128;     // consecutive channel groups: coalesced row reads
constexpr int kRowsPerChunk = 64; // rows one thread walks; its K-1 history rows are re-read
// At least 4 blocks (512 threads) an SM: the row loads in flight are what feeds the copy rate,
// and 138 registers a thread (bf16, V = 8) allowed only 3.
constexpr int kMinBlocksPerSm = 4;

// V consecutive elements at p (16-byte aligned when V > 1) as floats, and back.
template <typename T, int V> __device__ __forceinline__ void load_row(const T* p, float (&v)[V]) {
    if constexpr (V == 1) {
        v[0] = to_float(*p);
    } else if constexpr (std::is_same_v<T, float>) {
        static_assert(V == 4);
        const float4 q = *reinterpret_cast<const float4*>(p);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
        static_assert(V == 8);
        bf16x8_to_float(*reinterpret_cast<const uint4*>(p), v);
    }
}
template <typename T, int V> __device__ __forceinline__ void store_row(T* p, const float (&v)[V]) {
    if constexpr (V == 1) {
        *p = from_float<T>(v[0]);
    } else if constexpr (std::is_same_v<T, float>) {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        *reinterpret_cast<uint4*>(p) = float_to_bf16x8(v);
    }
}

// Grid (channel group block, row chunk, sequence): thread (group, chunk) walks rows [r0, r1) of
// its sequence in order with the K-1 previous inputs of its V channels in registers, taken from x
// for rows inside this call and from conv_state for earlier positions. Only chunk 0's thread
// touches conv_state: it reads the old state before anything else and writes the new one (the
// sequence's last K-1 inputs: x's last rows, or old state entries when the call has fewer than
// K-1 rows), so the chunks need no ordering among themselves. H >= K - 1 history slots.
template <typename T, int V, int H>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    conv_chunks(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ w, int K,
                int64_t C, const int32_t* row_begin, const int32_t* slots,
                const int32_t* snapshot_rows, T* __restrict__ state, T* __restrict__ y,
                int64_t y_stride) {
    constexpr int kRowsInFlight = V == 1 ? 8 : 4; // row inputs loaded before the first is used
    static_assert(kRowsPerChunk % kRowsInFlight == 0);
    pdl_wait_and_release();
    const int64_t c0 = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
    const int s = blockIdx.z;
    if (c0 >= C) return;
    const int64_t b = row_begin[s], e = row_begin[s + 1];
    const int64_t r0 = b + int64_t(blockIdx.y) * kRowsPerChunk;
    if (r0 >= e) return;
    const int64_t r1 = min(e, r0 + kRowsPerChunk);
    // The vector route runs only at K = H + 1 (the dispatcher checks it): a compile-time S keeps
    // taps[v][S] and the history arrays in registers (a runtime S put 224 bytes of them in local
    // memory, ptxas -v).
    const int S = V > 1 ? H : K - 1;
    // st(v)[j]: channel c0 + v's state entry j.
    const auto st = [&](int v) { return state + (int64_t(slots[s]) * C + c0 + v) * S; };
    // Per-row snapshots (seq_batch.h): at most kMaxSnapshotRows rows, so chunk 0 holds them all.
    const int32_t snap = snapshot_rows ? snapshot_rows[s] : -1;
    // hist[v][j]: channel c0 + v's input at row r0 - S + j (st(v)[S - (b - q)] for a row q before
    // this call).
    float hist[V][H];
#pragma unroll
    for (int j = 0; j < H; ++j) {
        const int64_t q = r0 - S + j;
        float in[V] = {};
        if (j < S && q >= b) load_row<T, V>(x + q * x_stride + c0, in);
#pragma unroll
        for (int v = 0; v < V; ++v)
            hist[v][j] = j >= S ? 0.0f : q >= b ? in[v] : to_float(st(v)[j]); // q < b: chunk 0
    }
    float taps[V][H + 1];
#pragma unroll
    for (int v = 0; v < V; ++v)
#pragma unroll
        for (int j = 0; j <= H; ++j) taps[v][j] = j < K ? to_float(w[(c0 + v) * K + j]) : 0.0f;
    for (int64_t r_group = r0; r_group < r1; r_group += kRowsInFlight) {
        float in[kRowsInFlight][V];
#pragma unroll
        for (int u = 0; u < kRowsInFlight; ++u)
            if (r_group + u < r1) load_row<T, V>(x + (r_group + u) * x_stride + c0, in[u]);
#pragma unroll
        for (int u = 0; u < kRowsInFlight; ++u) {
            const int64_t r = r_group + u;
            if (r >= r1) break;
            float out[V];
#pragma unroll
            for (int v = 0; v < V; ++v) {
                const float cur = in[u][v];
                float sum = taps[v][S] * cur;
#pragma unroll
                for (int j = 0; j < H; ++j)
                    if (j < S) sum += taps[v][j] * hist[v][j];
                out[v] = sum / (1.0f + __expf(-sum));
#pragma unroll
                for (int j = 0; j + 1 < H; ++j)
                    if (j + 1 < S) hist[v][j] = hist[v][j + 1];
#pragma unroll
                for (int j = 0; j < H; ++j)
                    if (j == S - 1) hist[v][j] = cur; // constant indices keep hist in registers
            }
            store_row<T, V>(y + r * y_stride + c0, out);
            if (snap >= 0 && r + 1 < e) { // the state after row r: inputs r - S + 1 .. r
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    T* to = state + ((int64_t(snap) + (r - b)) * C + c0 + v) * S;
#pragma unroll
                    for (int j = 0; j < H; ++j)
                        if (j < S) to[j] = from_float<T>(hist[v][j]);
                }
            }
        }
    }
    if (blockIdx.y != 0) return;
    // New state entry j: the input at row e - S + j, or old entry j + n before this call (n < S
    // there). Entries are written in ascending j and j + n > j, so the old entry read is still
    // unwritten: the old state needs no registers through the row loop.
    const int64_t n = e - b;
#pragma unroll
    for (int j = 0; j < H; ++j) {
        if (j >= S) break;
        const int64_t q = e - S + j;
#pragma unroll
        for (int v = 0; v < V; ++v) st(v)[j] = q >= b ? x[q * x_stride + c0 + v] : st(v)[j + n];
    }
}

} // namespace

void causal_conv1d_silu(const ExecContext& ctx, const TensorView& x, const TensorView& w,
                        const SeqBatch& batch, const TensorView& conv_state, const TensorView& y) {
    const int64_t C = x.size(1), K = w.size(1);
    if (batch.num_seqs == 0 || x.size(0) == 0) return;
    const unsigned chunks = unsigned((batch.max_rows_per_seq + kRowsPerChunk - 1) / kRowsPerChunk);
    dispatch_float(x.dtype, "causal_conv1d_silu", [&](auto tag) {
        using E = decltype(tag);
        constexpr int kVec = 16 / int(sizeof(E));
        const bool vec = K == kQwenHistory + 1 && C % kVec == 0 && x.stride[0] % kVec == 0 &&
                         y.stride[0] % kVec == 0 && aligned16(x.data) && aligned16(y.data);
        auto launch = [&](auto kernel, int v) {
            const dim3 grid(blocks_for(C / v, kThreads), std::max(chunks, 1u),
                            unsigned(batch.num_seqs));
            launch_pdl(ctx, kernel, grid, kThreads, 0, x.ptr<E>(), x.stride[0], w.ptr<E>(),
                       int(K), C, batch.row_begin.ptr<int32_t>(), batch.state_slot.ptr<int32_t>(),
                       batch.has_snapshots() ? batch.snapshot_row.ptr<int32_t>() : nullptr,
                       conv_state.ptr<E>(), y.ptr<E>(), y.stride[0]);
        };
        if (vec)
            launch(conv_chunks<E, kVec, kQwenHistory>, kVec);
        else
            launch(conv_chunks<E, 1, kMaxHistory>, 1);
    });
    check_launch("conv_chunks");
}

} // namespace ninfer::ops::cuda
