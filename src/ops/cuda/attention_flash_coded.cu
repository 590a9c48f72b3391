// The tensor-core prefill route of paged_attention (attention_flash.cu) over quantized planes
// (ops/kv_codec.h): flash_prefill_bf16's schedule and MMAs (attention_flash.cuh) with the codes
// and scales of the next key tile copied (double-buffered) while the current one is attended.
// Once a tile has landed, the block turns it into the bf16 K and V tiles the MMAs read,
// bf16_rn(decode(code, scale)) (kvq::decode8: exactly the codec's decode), so the one bf16 tile
// needs no second buffer. Shared memory (D = 256): queries 33 KB, bf16 K and V 33 KB, two stages
// of codes 32 KB and of scale values 2 KB: 100 KB, two blocks per SM as the bf16 kernel. That is
// more than sm_86 / sm_89 / sm_120 give a block (99 KB): there D = 256 takes the split-K kernel
// (flash_prefill_supported asks shared_memory_fits).
#include <cstdint>

#include "ops/cuda/attention_flash.cuh"
#include "ops/cuda/kv_plane.cuh"

namespace ninfer::ops::cuda {
namespace {

using namespace flash;

template <int D> constexpr int code_stage_bytes() {
    return 2 * kTileKeys * D; // [K, V][kTileKeys][D] codes of 1 byte
}
constexpr int kScaleStage = 2 * kTileKeys * kvq::kMaxScales; // floats: [K, V][kTileKeys][G]

template <int D> constexpr int coded_smem_bytes() {
    return (kTileRows + 2 * kTileKeys) * (D + kPad) * 2 + 2 * code_stage_bytes<D>() +
           2 * kScaleStage * int(sizeof(float));
}
static_assert(coded_smem_bytes<256>() <= 227 * 1024, "sm_90 shared memory per block");

// Copies the codes of keys [key0, key0 + kTileKeys) of (sequence s, kv head) into stage sC
// (16-byte cp.async; zeros past `last`), and loads the scale of thread t < kTileKeys * G (key
// t / G, group t % G) into the registers it returns (zero past `last`: those keys decode to 0).
template <int D, typename Codec>
__device__ kvq::RowScales<Codec> load_code_tile(const FlashArgs& a,
                                                const kvq::CodedPlanes<Codec>& kv, int s, int kvh,
                                                int64_t key0, int64_t last, uint8_t* sC) {
    static_assert(sizeof(typename Codec::Code) == 1);
    constexpr int kChunks = D / 16; // 16-byte chunks per row
    for (int e = threadIdx.x; e < kTileKeys * kChunks; e += blockDim.x) {
        const int row = e / kChunks, chunk = e % kChunks;
        const bool valid = key0 + row <= last;
        const int64_t r = valid ? cache_index(a, s, kvh, key0 + row) : 0; // rows
        cp_async_16(sC + row * D + chunk * 16, kv.k + r * D + chunk * 16, valid);
        cp_async_16(sC + (kTileKeys + row) * D + chunk * 16, kv.v + r * D + chunk * 16, valid);
    }
    const int G = Codec::groups(D), row = threadIdx.x / G, g = threadIdx.x % G;
    kvq::RowScales<Codec> raw;
    if (row < kTileKeys && key0 + row <= last) {
        const int64_t r = cache_index(a, s, kvh, key0 + row);
        raw.k = kv.k_scale[r * G + g];
        raw.v = kv.v_scale[r * G + g];
    }
    return raw;
}

// The scale values of load_code_tile's registers into stage sS.
template <int D, typename Codec>
__device__ void store_tile_scales(const kvq::RowScales<Codec>& raw, float* sS) {
    const int G = Codec::groups(D), row = threadIdx.x / G, g = threadIdx.x % G;
    if (row >= kTileKeys) return;
    sS[row * kvq::kMaxScales + g] = Codec::scale_value(raw.k);
    sS[(kTileKeys + row) * kvq::kMaxScales + g] = Codec::scale_value(raw.v);
}

// Stage (sC, sS) -> the bf16 tiles sK, sV [kTileKeys][D + kPad]: 8 codes a thread a step (one
// group: 8 | 64), one 16-byte store.
template <int D, typename Codec>
__device__ void decode_tile(const uint8_t* sC, const float* sS, __nv_bfloat16* sK,
                            __nv_bfloat16* sV) {
    constexpr int kPieces = D / 8; // per row
    for (int e = threadIdx.x; e < 2 * kTileKeys * kPieces; e += blockDim.x) {
        const int pr = e / kPieces, d0 = (e % kPieces) * 8; // pr = plane * kTileKeys + row
        float v[8];
        kvq::decode8<Codec>(*reinterpret_cast<const uint2*>(sC + pr * D + d0),
                            sS[pr * kvq::kMaxScales + kvq::group_of<Codec>(d0, D)], v);
        __nv_bfloat16* dst =
            (pr < kTileKeys ? sK + pr * (D + kPad) : sV + (pr - kTileKeys) * (D + kPad)) + d0;
        *reinterpret_cast<uint4*>(dst) =
            make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                       pack_bf16x2(v[6], v[7]));
    }
}

// Key tile kt's codes and scales sit in stage kt % 2. Iteration kt issues tile kt + 1's copies
// into the other stage (last read by decode_tile of tile kt - 1, before its barrier) and its
// scale loads, waits for tile kt, decodes it into the bf16 tile (last read by the MMAs of tile
// kt - 1, before this iteration's first barrier), attends it, and stores tile kt + 1's scales
// (read after the next iteration's first barrier). Tile 0's scales are stored up front.
template <int D, typename Codec>
__global__ void __launch_bounds__(kWarps * 32)
    flash_prefill_coded(FlashArgs a, kvq::CodedPlanes<Codec> kv) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + kTileRows * (D + kPad); // [kTileKeys][D + kPad]
    __nv_bfloat16* sV = sK + kTileKeys * (D + kPad);
    uint8_t* sC = reinterpret_cast<uint8_t*>(sV + kTileKeys * (D + kPad)); // 2 stages
    float* sS = reinterpret_cast<float*>(sC + 2 * code_stage_bytes<D>());  // 2 stages
    FlashWork w;
    if (!flash_work(a, w)) return;
    load_queries<D>(a, w, sQ);
    store_tile_scales<D>(load_code_tile<D>(a, kv, w.s, w.kvh, 0, w.last, sC), sS);
    cp_async_commit();
    FlashState<D> st(w);
    for (int kt = 0; kt < w.key_tiles; ++kt) {
        const int buf = kt & 1, nb = buf ^ 1;
        kvq::RowScales<Codec> next;
        if (kt + 1 < w.key_tiles) {
            next = load_code_tile<D>(a, kv, w.s, w.kvh, int64_t(kt + 1) * kTileKeys, w.last,
                                     sC + nb * code_stage_bytes<D>());
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        decode_tile<D, Codec>(sC + buf * code_stage_bytes<D>(), sS + buf * kScaleStage, sK, sV);
        __syncthreads();
        attend<D>(a, w, st, sQ, sK, sV, int64_t(kt) * kTileKeys);
        if (kt + 1 < w.key_tiles) store_tile_scales<D>(next, sS + nb * kScaleStage);
    }
    store_rows<D>(a, w, st);
}

template <int D, typename Codec>
void launch(const ExecContext& ctx, const FlashArgs& a, dim3 grid,
            const kvq::CodedPlanes<Codec>& kv) {
    // Over 48 KiB: the opt-in, set at every launch as flash_prefill_bf16's.
    opt_in_shared_memory(ctx, flash_prefill_coded<D, Codec>, coded_smem_bytes<D>(),
                         "flash_prefill_coded");
    flash_prefill_coded<D, Codec>
        <<<grid, kWarps * 32, coded_smem_bytes<D>(), stream_of(ctx)>>>(a, kv);
    check_launch("flash_prefill_coded");
}

} // namespace

int flash_coded_smem_bytes(int D) {
    return D == 64    ? coded_smem_bytes<64>()
           : D == 128 ? coded_smem_bytes<128>()
                      : coded_smem_bytes<256>();
}

void launch_flash_coded(const ExecContext& ctx, const flash::FlashArgs& a, dim3 grid, int D,
                        const KvPlane& k_cache, const KvPlane& v_cache) {
    kvq::dispatch_codec(k_cache, "paged_attention", [&](auto codec) {
        using Codec = decltype(codec);
        const auto kv = kvq::coded_planes<Codec>(k_cache, v_cache);
        switch (D) {
        case 64:
            return launch<64>(ctx, a, grid, kv);
        case 128:
            return launch<128>(ctx, a, grid, kv);
        default:
            return launch<256>(ctx, a, grid, kv);
        }
    });
}

} // namespace ninfer::ops::cuda
