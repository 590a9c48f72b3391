// Implements attention_prep (ops/attention_prep.h) on CUDA: the q and k RMS norms, RoPE and the KV
// cache write of an attention layer in one kernel, a warp per (row, head) over the nH query, nKV
// key and nKV value heads; lane l holds dims [8 l, 8 l + 8) of its head.
// Chosen for any batch when D % 8 == 0, D <= 256, rotary_dim % 16 == 0 (a rotate-half partner is
// then another lane's 8 dims) and every row, head, weight and cache starts 16-byte aligned.
// Quantized planes: the K head (its values rounded to T, as an unquantized cache stores them) and
// the V head are encoded by their warp with the plane's codec (kvq::encode_row), so the codes and
// scales equal kv_cache_write's of the same T rows (the composed route's).
// Assumes contiguous caches and norm weights (checked by the dispatcher).
#include <cstdint>
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/kv_plane.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kLaneDims = 8;              // dims per lane: one 16-byte load of bf16
constexpr int kMaxDim = 32 * kLaneDims;   // a warp holds a whole head
constexpr int kFreqRounds = kMaxDim / 64; // rotate-half pairs a lane computes: <= 128 over 32
// Heads per block: the 35B's 20 heads (16 q, 2 k, 2 v) and the 27B's 32 fill whole blocks, and a
// decode row spreads over 5-8 SMs instead of queueing its heads on one.
constexpr int kWarps = 4;
constexpr int kMaxGridY = 65535; // CUDA's limit on gridDim.y

struct PrepArgs {
    const void *q_in, *k_in, *v_in, *q_norm, *k_norm;
    int64_t q_in_s0, q_in_s1, k_in_s0, k_in_s1, v_in_s0, v_in_s1; // row, head strides (elements)
    void* q;
    int64_t q_s0, q_s1;
    void *k_cache, *v_cache; // [NB, bs, nKV, D], contiguous: T, or a codec's codes
    void *k_scale, *v_scale; // [NB, bs, nKV, G], contiguous (quantized planes)
    const int32_t *positions, *row_begin, *pos_begin, *block_table;
    int block_table_stride, block_size, max_rows;
    int nH, nKV, D, half; // half = rotary_dim / 2
    float eps;
    double theta;
};

// 8 consecutive elements (16-byte aligned) as floats, and floats back rounded to the element type.
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[kLaneDims]) {
    bf16x8_to_float(*reinterpret_cast<const uint4*>(p), v);
}
__device__ __forceinline__ void load8(const float* p, float (&v)[kLaneDims]) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&v)[kLaneDims]) {
    *reinterpret_cast<uint4*>(p) = float_to_bf16x8(v);
}
__device__ __forceinline__ void store8(float* p, const float (&v)[kLaneDims]) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename T> __device__ __forceinline__ void copy8(const T* src, T* dst) {
#pragma unroll
    for (int i = 0; i < int(sizeof(T)) * kLaneDims / 16; ++i)
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
}

// rope on the warp's head: pairs j < half rotate dims j and j + half, so lane l's 8 dims pair
// with lane l +- half / 8's. Each frequency's cos and sin is computed once per warp (lane j % 32
// holds pair j's, rope.cu's expressions) and shuffled to the lanes that need it.
__device__ void rotate_half(float (&v)[kLaneDims], int half, double theta, float pos, int lane) {
    float c[kFreqRounds], s[kFreqRounds];
#pragma unroll
    for (int k = 0; k < kFreqRounds; ++k) c[k] = 1.0f, s[k] = 0.0f;
#pragma unroll
    for (int k = 0; k < kFreqRounds; ++k) {
        if (32 * k >= half) break; // warp-uniform: no pairs from here on
        const int j = 32 * k + lane;
        if (j >= half) continue;
        // inv_freq as an f32 value (correctly rounded, as the CPU backend); angle in f32 as HF.
        const float inv_freq = float(1.0 / pow(theta, double(2 * j) / double(2 * half)));
        sincosf(pos * inv_freq, &s[k], &c[k]);
    }
    const int pair_lanes = half / kLaneDims;
    const bool first = lane < pair_lanes, rotated = lane < 2 * pair_lanes;
    const int partner = rotated ? (first ? lane + pair_lanes : lane - pair_lanes) : lane;
    const int j0 = (first ? lane : lane - pair_lanes) * kLaneDims; // pair of v[0] (if rotated)
    const int k0 = j0 / 32; // j0 % 8 == 0: pairs j0 .. j0 + 7 sit in one round
    float ce[kLaneDims], se[kLaneDims], other[kLaneDims];
#pragma unroll
    for (int e = 0; e < kLaneDims; ++e) {
        ce[e] = 1.0f, se[e] = 0.0f;
#pragma unroll
        for (int k = 0; k < kFreqRounds; ++k) {
            if (32 * k >= half) break; // warp-uniform
            const float cv = __shfl_sync(0xffffffffu, c[k], (j0 + e) & 31);
            const float sv = __shfl_sync(0xffffffffu, s[k], (j0 + e) & 31);
            if (k == k0) ce[e] = cv, se[e] = sv;
        }
        other[e] = __shfl_sync(0xffffffffu, v[e], partner);
    }
    if (!rotated) return;
#pragma unroll
    for (int e = 0; e < kLaneDims; ++e)
        v[e] = first ? v[e] * ce[e] - other[e] * se[e] : v[e] * ce[e] + other[e] * se[e];
}

// rms_norm then rope of one head (x, w: the head's first element), a warp per head: v gets the
// lane's dims (zeros past D), which the caller rounds to T.
template <typename T>
__device__ void norm_rope_head(const T* x, const T* w, const PrepArgs& a, float pos, int lane,
                               float (&v)[kLaneDims]) {
    const int d0 = lane * kLaneDims;
    const bool active = d0 < a.D;
    float wv[kLaneDims] = {};
#pragma unroll
    for (int e = 0; e < kLaneDims; ++e) v[e] = 0.0f;
    if (active) {
        load8(x + d0, v);
        load8(w + d0, wv);
    }
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kLaneDims; ++e) sum += v[e] * v[e];
    const float scale = rsqrtf(warp_sum(sum) / float(a.D) + a.eps);
    // rms_norm's rounding point: the normalised value in T, which rope then reads.
#pragma unroll
    for (int e = 0; e < kLaneDims; ++e)
        v[e] = to_float(from_float<T>(v[e] * scale * (1.0f + wv[e])));
    rotate_half(v, a.half, a.theta, pos, lane);
}

// grid (sequence x row slot, head quad): warp w of block (x, y) takes head 4 y + w of the row,
// query heads [0, nH), then key heads, then value heads. Codec: void for a T cache, else the
// planes' codec.
template <typename T, typename Codec>
__global__ void __launch_bounds__(32 * kWarps) attention_prep_rows(PrepArgs a) {
    pdl_wait_and_release();
    const int s = blockIdx.x / a.max_rows, i = blockIdx.x % a.max_rows;
    const int head = blockIdx.y * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int32_t r0 = a.row_begin[s];
    if (r0 + i >= a.row_begin[s + 1] || head >= a.nH + 2 * a.nKV) return; // warp-uniform
    const int64_t r = r0 + i;
    const float pos = float(a.positions[r]);
    const int d0 = lane * kLaneDims;
    float v[kLaneDims];
    if (head < a.nH) {
        norm_rope_head(static_cast<const T*>(a.q_in) + r * a.q_in_s0 + head * a.q_in_s1,
                       static_cast<const T*>(a.q_norm), a, pos, lane, v);
        if (d0 < a.D) store8(static_cast<T*>(a.q) + r * a.q_s0 + head * a.q_s1 + d0, v);
        return;
    }
    // Cache row of (position p, kv head kvh): kv_cache_write's paged layout.
    const int kvh = (head - a.nH) % a.nKV;
    const int64_t p = a.pos_begin[s] + i;
    const int32_t block = a.block_table[int64_t(s) * a.block_table_stride + p / a.block_size];
    const int64_t cache_row = (int64_t(block) * a.block_size + p % a.block_size) * a.nKV + kvh;
    const bool is_k = head < a.nH + a.nKV;
    if (is_k)
        norm_rope_head(static_cast<const T*>(a.k_in) + r * a.k_in_s0 + kvh * a.k_in_s1,
                       static_cast<const T*>(a.k_norm), a, pos, lane, v);
    const T* v_in = static_cast<const T*>(a.v_in) + r * a.v_in_s0 + kvh * a.v_in_s1 + d0;
    if constexpr (std::is_void_v<Codec>) {
        if (d0 >= a.D) return;
        if (is_k)
            store8(static_cast<T*>(a.k_cache) + cache_row * a.D + d0, v);
        else
            copy8(v_in, static_cast<T*>(a.v_cache) + cache_row * a.D + d0);
    } else {
        // The values an unquantized cache would hold (K rounded to T; V as given), encoded by
        // the whole warp.
        if (is_k) {
#pragma unroll
            for (int e = 0; e < kLaneDims; ++e) v[e] = to_float(from_float<T>(v[e]));
        } else {
#pragma unroll
            for (int e = 0; e < kLaneDims; ++e) v[e] = 0.0f;
            if (d0 < a.D) load8(v_in, v);
        }
        using Code = typename Codec::Code;
        using Scale = typename Codec::Scale;
        const int G = Codec::groups(a.D);
        kvq::encode_row<Codec>(v, a.D, lane,
                               static_cast<Code*>(is_k ? a.k_cache : a.v_cache) + cache_row * a.D,
                               static_cast<Scale*>(is_k ? a.k_scale : a.v_scale) + cache_row * G);
    }
}

// A [T, heads, D] view whose lanes' 8-element chunks all start 16-byte aligned.
bool heads_aligned(const TensorView& t) {
    return aligned16(t.data) && t.stride[0] % kLaneDims == 0 && t.stride[1] % kLaneDims == 0;
}

} // namespace

bool attention_prep_fused_fits(const TensorView& q_in, const TensorView& k_in,
                               const TensorView& v_in, const TensorView& q_norm,
                               const TensorView& k_norm, int64_t rotary_dim, const TensorView& q,
                               const KvPlane& k_cache, const KvPlane& v_cache) {
    const int64_t D = q_in.size(2), heads = q_in.size(1) + 2 * k_in.size(1);
    return fused_routes_enabled("attention_prep") && D % kLaneDims == 0 && D <= kMaxDim &&
           rotary_dim % (2 * kLaneDims) == 0 && heads <= int64_t(kMaxGridY) * kWarps &&
           heads_aligned(q_in) && heads_aligned(k_in) && heads_aligned(v_in) && heads_aligned(q) &&
           aligned16(q_norm.data) && aligned16(k_norm.data) && aligned16(k_cache.data.data) &&
           aligned16(v_cache.data.data); // codes too: a lane stores 8 at once (D % 8 == 0)
}

void attention_prep_fused(const ExecContext& ctx, const TensorView& q_in, const TensorView& k_in,
                          const TensorView& v_in, const TensorView& q_norm,
                          const TensorView& k_norm, float eps, const TensorView& positions,
                          int64_t rotary_dim, double theta, const SeqBatch& batch,
                          const TensorView& q, const KvPlane& k_cache,
                          const KvPlane& v_cache) {
    if (batch.num_seqs == 0 || batch.max_rows_per_seq == 0) return;
    const int nH = int(q_in.size(1)), nKV = int(k_in.size(1));
    const PrepArgs args{q_in.data,
                        k_in.data,
                        v_in.data,
                        q_norm.data,
                        k_norm.data,
                        q_in.stride[0],
                        q_in.stride[1],
                        k_in.stride[0],
                        k_in.stride[1],
                        v_in.stride[0],
                        v_in.stride[1],
                        q.data,
                        q.stride[0],
                        q.stride[1],
                        k_cache.data.data,
                        v_cache.data.data,
                        k_cache.scale.data,
                        v_cache.scale.data,
                        positions.ptr<int32_t>(),
                        batch.row_begin.ptr<int32_t>(),
                        batch.pos_begin.ptr<int32_t>(),
                        batch.block_table.ptr<int32_t>(),
                        batch.block_table_stride,
                        batch.block_size,
                        batch.max_rows_per_seq,
                        nH,
                        nKV,
                        int(q_in.size(2)),
                        int(rotary_dim / 2),
                        eps,
                        theta};
    const dim3 grid{unsigned(int64_t(batch.num_seqs) * batch.max_rows_per_seq),
                    unsigned((nH + 2 * nKV + kWarps - 1) / kWarps)};
    dispatch_float(q_in.dtype, "attention_prep", [&](auto tag) {
        using E = decltype(tag);
        if (!k_cache.quantized())
            return launch_pdl(ctx, attention_prep_rows<E, void>, grid, 32 * kWarps, 0, args);
        kvq::dispatch_codec(k_cache, "attention_prep", [&](auto codec) {
            launch_pdl(ctx, attention_prep_rows<E, decltype(codec)>, grid, 32 * kWarps, 0, args);
        });
    });
    check_launch("attention_prep_rows");
}

} // namespace ninfer::ops::cuda
