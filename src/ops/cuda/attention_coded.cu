// paged_attention's decode kernel over quantized planes (ops/kv_codec.h), launched by
// attention.cu: attention_kernel's schedule (a block per (row, head group, key split), a warp per
// query head, 32-key tiles, split-K partials) with the tile's codes in shared memory instead of
// its values. A tile of 1-byte codes is half a bf16 one, so two fit the 48 KB of static shared
// memory: the copies of the next tile run while the current one is attended (the bf16 kernel,
// one tile in flight, waits a memory round trip per tile). Lanes decode the codes as they read
// them (the codes' values, kvq::code_values8, times the scale once per group sum), in f32 as
// attention_kernel does.
#include <type_traits>

#include "ops/cuda/attention_decode.cuh"
#include "ops/cuda/kv_plane.cuh"
#include "ops/cuda/mma.cuh"

namespace ninfer::ops::cuda {
namespace {

using namespace decode_attn;

constexpr int kTileKeys = 32;                        // one key per lane when scoring
constexpr int kKeyThreads = 32 * kWarps / kTileKeys; // threads that stage one key's rows
static_assert(kKeyThreads == 8);

template <typename Codec> struct CodedSmem {
    using Code = typename Codec::Code;
    static_assert(sizeof(Code) == 1);
    // Bytes per staged row: +16 so that lanes j reading rows j at one offset with 16-byte loads
    // hit distinct banks (a wavefront of 8 lanes; rows 68 words apart).
    static constexpr int kPitch = kMaxDim + 16;
    // Odd, so that lanes j reading row j's scale hit distinct banks.
    static constexpr int kScalePitch = kvq::kMaxScales + 1;
    Code k[2][kTileKeys][kPitch]; // two stages of K and V codes (17 KB each)
    Code v[2][kTileKeys][kPitch];
    float k_scale[2][kTileKeys][kScalePitch]; // their scale values
    float v_scale[2][kTileKeys][kScalePitch];
    float q[kMaxGroup][kMaxDim];
};
static_assert(sizeof(CodedSmem<kv::Int8G64>) <= 48 * 1024, "static shared memory limit");

// Issues this thread's share of the tile of keys [t0, t0 + n) into stage `buf`: thread 8 j + c
// takes key j's rows (one block-table read) and their 16-byte code chunks c, c + 8, ... (element
// by element, zero-padded to a multiple of 16 dims, when !vec), and loads scale group c (c < G)
// into the registers it returns: store_scales writes them once the tile has landed, so the
// loads, like the copies, complete while the previous tile is attended. Rows j >= n are not
// staged (the readers stop at n).
template <typename Codec>
__device__ kvq::RowScales<Codec> issue_tile(const PagedArgs& a, const kvq::CodedPlanes<Codec>& kv,
                                            int s, int64_t t0, int n, int kvh, int D, bool vec,
                                            CodedSmem<Codec>& sm, int buf) {
    using Code = typename Codec::Code;
    const int j = threadIdx.x / kKeyThreads, c = threadIdx.x % kKeyThreads;
    kvq::RowScales<Codec> scales;
    if (j >= n) return scales;
    const int64_t row = cache_offset(a, s, t0 + j, kvh); // PagedArgs in rows
    const Code* kr = kv.k + row * D;
    const Code* vr = kv.v + row * D;
    if (vec) {
        for (int d = 16 * c; d < D; d += 16 * kKeyThreads) {
            cp_async_16(&sm.k[buf][j][d], kr + d, true);
            cp_async_16(&sm.v[buf][j][d], vr + d, true);
        }
    } else {
        const int D16 = (D + 15) / 16 * 16;
        for (int d = c; d < D16; d += kKeyThreads) {
            sm.k[buf][j][d] = d < D ? kr[d] : Code(0);
            sm.v[buf][j][d] = d < D ? vr[d] : Code(0);
        }
    }
    const int G = Codec::groups(D);
    if (c < G) {
        scales.k = kv.k_scale[row * G + c];
        scales.v = kv.v_scale[row * G + c];
    }
    return scales;
}

// The scale values of the thread's (key, group) of a tile of n keys, from issue_tile's registers.
template <typename Codec>
__device__ void store_scales(const kvq::RowScales<Codec>& raw, int n, int D, CodedSmem<Codec>& sm,
                             int buf) {
    const int j = threadIdx.x / kKeyThreads, c = threadIdx.x % kKeyThreads;
    if (j < n && c < Codec::groups(D)) {
        sm.k_scale[buf][j][c] = Codec::scale_value(raw.k);
        sm.v_scale[buf][j][c] = Codec::scale_value(raw.v);
    }
}

// Staged key codes [d0, d0 + 16) (one group) . staged query, as two partial sums of the code
// values: the caller multiplies them by the group's scale (a product per 8 codes, not per code).
template <typename Codec>
__device__ __forceinline__ void dot16(const typename Codec::Code* row, const float* q, int d0,
                                      float& lo, float& hi) {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + d0);
    float k0[8], k1[8];
    kvq::code_values8<Codec>(make_uint2(raw.x, raw.y), k0);
    kvq::code_values8<Codec>(make_uint2(raw.z, raw.w), k1);
    const float4* q4 = reinterpret_cast<const float4*>(q + d0);
    const float4 a = q4[0], b = q4[1], c = q4[2], d = q4[3];
    lo = a.x * k0[0] + a.y * k0[1] + a.z * k0[2] + a.w * k0[3] + b.x * k0[4] + b.y * k0[5] +
         b.z * k0[6] + b.w * k0[7];
    hi = c.x * k1[0] + c.y * k1[1] + c.z * k1[2] + c.w * k1[3] + d.x * k1[4] + d.y * k1[5] +
         d.z * k1[6] + d.w * k1[7];
}

// Lane j's score of key j: 16 codes at a time (a 16-code chunk starts at a multiple of 16 < D,
// so it lies in one group), each chunk's sums times its scale. Four partial sums, as
// attend_tile's.
template <typename Codec>
__device__ __forceinline__ float score_coded(const typename Codec::Code* kr, const float* ks,
                                             const float* q, int D) {
    const int D16 = (D + 15) / 16 * 16; // rows are zero-padded to a multiple of 16 codes
    float dot[4] = {};
    int d0 = 0;
    for (; d0 + 32 <= D16; d0 += 32) {
        float a, b, c, d;
        dot16<Codec>(kr, q, d0, a, b);
        dot16<Codec>(kr, q, d0 + 16, c, d);
        const float s0 = ks[kvq::group_of<Codec>(d0, D)];
        const float s1 = ks[kvq::group_of<Codec>(d0 + 16, D)];
        dot[0] += s0 * a, dot[1] += s0 * b, dot[2] += s1 * c, dot[3] += s1 * d;
    }
    for (; d0 < D16; d0 += 16) {
        float a, b;
        dot16<Codec>(kr, q, d0, a, b);
        const float s = ks[kvq::group_of<Codec>(d0, D)];
        dot[0] += s * a, dot[1] += s * b;
    }
    return (dot[0] + dot[1]) + (dot[2] + dot[3]);
}

// attend_tile (attention.cu) on stage `buf`: lane j scores key j, the softmax update, then P V
// with lane l over dims [8 l, 8 l + 8): key j adds (p_j s_j) times its code values, four keys a
// step so that their shared-memory loads overlap.
template <typename Codec>
__device__ void attend_coded(const CodedSmem<Codec>& sm, int buf, int g, int n, int D,
                             HeadState& st) {
    constexpr int kStep = 4;
    const int lane = threadIdx.x & 31;
    const float score = lane < n
                            ? score_coded<Codec>(sm.k[buf][lane], sm.k_scale[buf][lane], sm.q[g], D)
                            : -FLT_MAX;
    const float p = softmax_update(score, n, st);
    const int d0 = lane * 8;
    const bool has_dims = d0 < D; // every lane shuffles; lanes past D add nothing
    const int group = has_dims ? kvq::group_of<Codec>(d0, D) : 0;
    auto add_keys = [&](int j, auto steps) {
        constexpr int kKeys = decltype(steps)::value;
        float w[kKeys], c[kKeys][8];
#pragma unroll
        for (int u = 0; u < kKeys; ++u) w[u] = __shfl_sync(0xffffffffu, p, j + u);
        if (!has_dims) return;
#pragma unroll
        for (int u = 0; u < kKeys; ++u) {
            w[u] *= sm.v_scale[buf][j + u][group];
            kvq::code_values8<Codec>(*reinterpret_cast<const uint2*>(&sm.v[buf][j + u][d0]), c[u]);
        }
#pragma unroll
        for (int u = 0; u < kKeys; ++u)
#pragma unroll
            for (int e = 0; e < 8; ++e) st.acc[e] += w[u] * c[u][e];
    };
    int j = 0;
    for (; j + kStep <= n; j += kStep) add_keys(j, std::integral_constant<int, kStep>{});
    for (; j < n; ++j) add_keys(j, std::integral_constant<int, 1>{});
}

// Tile t of the split (keys [keys.begin + 32 t, ...)) sits in stage t % 2. Iteration t issues tile
// t + 1 into the other stage (last read by tile t - 1, before the previous trailing barrier),
// waits for tile t's copies only, stores tile t's scales, and attends it after the barrier.
template <typename T, typename Codec>
__global__ void __launch_bounds__(32 * kWarps, 1)
    attention_coded_kernel(PagedArgs a, const T* q, int64_t q_s0, int64_t q_s1,
                           kvq::CodedPlanes<Codec> kv, int group, int D, bool vec, float scale,
                           T* out, int64_t o_s0, int64_t o_s1, int max_rows, float* partials) {
    pdl_wait_and_release();
    __shared__ __align__(16) CodedSmem<Codec> sm;
    DecodeWork w;
    if (!decode_work(a, group, max_rows, w)) return;
    stage_queries(q, w.r * q_s0, q_s1, w.h0, w.G, D, scale, sm.q); // read after the first barrier
    const KeyRange keys = split_keys(w);
    if (keys.empty()) return; // a split the context does not reach (the combine skips it)
    const int warp = threadIdx.x >> 5;
    const int64_t count = keys.end - keys.begin;
    const int tiles = count > 0 ? int((count + kTileKeys - 1) / kTileKeys) : 0;
    auto tile_keys = [&](int t) {
        return int(min(int64_t(kTileKeys), keys.end - (keys.begin + int64_t(t) * kTileKeys)));
    };
    HeadState st[kMaxGroup / kWarps];
    kvq::RowScales<Codec> scales;
    if (tiles > 0) {
        scales = issue_tile(a, kv, w.s, keys.begin, tile_keys(0), w.kvh, D, vec, sm, 0);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        const int buf = t & 1, n = tile_keys(t);
        kvq::RowScales<Codec> next;
        if (t + 1 < tiles) {
            next = issue_tile(a, kv, w.s, keys.begin + int64_t(t + 1) * kTileKeys, tile_keys(t + 1),
                              w.kvh, D, vec, sm, buf ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        store_scales(scales, n, D, sm, buf);
        __syncthreads(); // tile t's codes and scales (and the queries) are visible
#pragma unroll
        for (int m = 0; m < kMaxGroup / kWarps; ++m)
            if (warp + kWarps * m < w.G) attend_coded(sm, buf, warp + kWarps * m, n, D, st[m]);
        __syncthreads(); // stage buf is refilled by iteration t + 1
        scales = next;
    }
#pragma unroll
    for (int m = 0; m < kMaxGroup / kWarps; ++m)
        if (warp + kWarps * m < w.G)
            store_head(a, st[m], w.h0 + warp + kWarps * m, w.r, D, partials, out, o_s0, o_s1);
}

} // namespace

void launch_attention_coded(const ExecContext& ctx, dim3 grid, const decode_attn::PagedArgs& a,
                            const TensorView& q, const KvPlane& k_cache, const KvPlane& v_cache,
                            int group, float scale, const TensorView& out, int max_rows,
                            float* partials) {
    const int D = int(q.size(2));
    // 16-byte cp.async of the code rows (row * D bytes from 16-byte aligned planes).
    const bool vec = D % 16 == 0 && reinterpret_cast<uintptr_t>(k_cache.data.data) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(v_cache.data.data) % 16 == 0;
    kvq::dispatch_codec(k_cache, "paged_attention", [&](auto codec) {
        using Codec = decltype(codec);
        if (!kvq::shape_fits<Codec>(D))
            fail(ErrorCategory::Unsupported, "paged_attention: CUDA reads ",
                 kv_dtype_name(k_cache.dtype(), q.dtype), " planes of head dim <= ", kvq::kRowDims,
                 ", got ", D);
        dispatch_float(q.dtype, "paged_attention", [&](auto tag) {
            using E = decltype(tag);
            launch_pdl(ctx, attention_coded_kernel<E, Codec>, grid, 32 * kWarps, 0, a, q.ptr<E>(),
                       q.stride[0], q.stride[1], kvq::coded_planes<Codec>(k_cache, v_cache), group,
                       D, vec, scale, out.ptr<E>(), out.stride[0], out.stride[1], max_rows,
                       partials);
        });
    });
    check_launch("attention_coded_kernel");
}

} // namespace ninfer::ops::cuda
