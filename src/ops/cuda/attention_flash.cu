// Implements the prefill route of ops/attention.h's paged_attention on CUDA tensor cores.
// flash_prefill_bf16: one block per (query head, tile of 64 rows of one sequence); 4 warps own
//   16 rows each and stream the sequence's keys [0, last row's position] in tiles of 32 through
//   a double-buffered cp.async pipeline, with S = Q K^T and O += P V on bf16 m16n8k16 MMAs and an
//   online softmax in fp32 (FlashAttention-2's schedule over the paged cache; attention_flash.cuh).
//   Quantized planes take the same schedule with their codes staged (attention_flash_coded.cu).
// Chosen when the batch holds a prompt chunk of at least kFlashMinRows rows (see attention.cu).
// Assumes bf16 q/out, head dim 64/128/256, 16-byte aligned q/out head rows and cache rows.
#include "ops/cuda/attention_flash.h"
#include "ops/cuda/attention_flash.cuh"

namespace ninfer::ops::cuda {
namespace {

using namespace flash;

template <int D> constexpr int smem_bytes() {
    return (kTileRows + 2 * 2 * kTileKeys) * (D + kPad) * 2;
}

// Copies keys [key0, key0 + kTileKeys) of (sequence s, kv head) into sK/sV (zeros past `last`).
template <int D>
__device__ void load_kv_tile(const FlashArgs& a, int s, int kvh, int64_t key0, int64_t last,
                             __nv_bfloat16* sK, __nv_bfloat16* sV) {
    constexpr int kChunks = D / 8; // 16-byte chunks per row
    for (int e = threadIdx.x; e < kTileKeys * kChunks; e += blockDim.x) {
        const int row = e / kChunks, chunk = e % kChunks;
        const int64_t key = key0 + row;
        const bool valid = key <= last;
        const int64_t off = valid ? cache_index(a, s, kvh, key) : 0;
        cp_async_16(sK + row * (D + kPad) + chunk * 8, a.kc + off + chunk * 8, valid);
        cp_async_16(sV + row * (D + kPad) + chunk * 8, a.vc + off + chunk * 8, valid);
    }
}

template <int D> __global__ void __launch_bounds__(kWarps * 32) flash_prefill_bf16(FlashArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + kTileRows * (D + kPad); // [2][kTileKeys][D + kPad]
    __nv_bfloat16* sV = sK + 2 * kTileKeys * (D + kPad);
    FlashWork w;
    if (!flash_work(a, w)) return;
    load_queries<D>(a, w, sQ);
    load_kv_tile<D>(a, w.s, w.kvh, 0, w.last, sK, sV);
    cp_async_commit();
    FlashState<D> st(w);
    for (int kt = 0; kt < w.key_tiles; ++kt) {
        const int buf = kt & 1;
        if (kt + 1 < w.key_tiles) {
            const int nb = buf ^ 1;
            load_kv_tile<D>(a, w.s, w.kvh, int64_t(kt + 1) * kTileKeys, w.last,
                            sK + nb * kTileKeys * (D + kPad), sV + nb * kTileKeys * (D + kPad));
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        attend<D>(a, w, st, sQ, sK + buf * kTileKeys * (D + kPad),
                  sV + buf * kTileKeys * (D + kPad), int64_t(kt) * kTileKeys);
        __syncthreads();
    }
    store_rows<D>(a, w, st);
}

bool aligned16(const TensorView& t) {
    return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.stride[0] % 8 == 0 &&
           t.stride[1] % 8 == 0;
}

// A plane whose rows the tile loads copy 16 bytes at a time: bf16 rows of 8-element multiples,
// or quantized codes (contiguous rows of D bytes, D a multiple of 16 here).
bool plane_aligned16(const KvPlane& p) {
    if (reinterpret_cast<uintptr_t>(p.data.data) % 16 != 0) return false;
    if (p.quantized()) return true;
    return p.data.dtype == DType::BF16 && p.data.stride[1] % 8 == 0 && p.data.stride[2] % 8 == 0;
}

template <int D> void launch(const ExecContext& ctx, const FlashArgs& args, dim3 grid) {
    // Over 48 KiB of shared memory needs the opt-in, per device: set it at every launch (a
    // host-side call of about a microsecond, next to a prefill kernel of milliseconds).
    opt_in_shared_memory(ctx, flash_prefill_bf16<D>, smem_bytes<D>(), "flash_prefill_bf16");
    flash_prefill_bf16<D><<<grid, kWarps * 32, smem_bytes<D>(), stream_of(ctx)>>>(args);
    check_launch("flash_prefill_bf16");
}

// Dynamic shared memory of the kernel for head dim D: 99 KB for the bf16 planes at D = 256 (all
// that sm_86 / sm_89 / sm_120 give a block), 100 KB for quantized planes there.
int flash_smem_bytes(int64_t D, bool coded) {
    if (coded) return flash_coded_smem_bytes(int(D));
    return D == 64 ? smem_bytes<64>() : D == 128 ? smem_bytes<128>() : smem_bytes<256>();
}

} // namespace

bool flash_prefill_supported(const TensorView& q, const KvPlane& k_cache, const KvPlane& v_cache,
                             const TensorView& out) {
    const int64_t D = q.size(2);
    return q.dtype == DType::BF16 && out.dtype == DType::BF16 &&
           (D == 64 || D == 128 || D == 256) && aligned16(q) && aligned16(out) &&
           plane_aligned16(k_cache) && plane_aligned16(v_cache) &&
           shared_memory_fits(q.device.index, size_t(flash_smem_bytes(D, k_cache.quantized())));
}

void flash_prefill(const ExecContext& ctx, const TensorView& q, const KvPlane& k_cache,
                   const KvPlane& v_cache, const SeqBatch& batch, float scale,
                   const TensorView& out) {
    const int q_tiles = (batch.max_rows_per_seq + flash::kTileRows - 1) / flash::kTileRows;
    const TensorView& kc = k_cache.data;
    const bool coded = k_cache.quantized();
    flash::FlashArgs args{reinterpret_cast<const __nv_bfloat16*>(q.data),
                   coded ? nullptr : reinterpret_cast<const __nv_bfloat16*>(kc.data),
                   coded ? nullptr : reinterpret_cast<const __nv_bfloat16*>(v_cache.data.data),
                   reinterpret_cast<__nv_bfloat16*>(out.data),
                   q.stride[0],
                   q.stride[1],
                   out.stride[0],
                   out.stride[1],
                   kc.stride[0],
                   kc.stride[1],
                   kc.stride[2],
                   batch.row_begin.ptr<int32_t>(),
                   batch.pos_begin.ptr<int32_t>(),
                   batch.block_table.ptr<int32_t>(),
                   batch.block_table_stride,
                   batch.block_size,
                   int(q.size(1) / kc.size(2)),
                   q_tiles,
                   scale * flash::kLog2e};
    const dim3 grid(unsigned(q.size(1)), unsigned(q_tiles), unsigned(batch.num_seqs));
    if (coded) {
        // Rows (block * bs + offset) * nKV + kv head: codes at row * D, scales at row * G.
        args.cache_s0 = kc.size(1) * kc.size(2), args.cache_s1 = kc.size(2), args.cache_s2 = 1;
        return launch_flash_coded(ctx, args, grid, int(q.size(2)), k_cache, v_cache);
    }
    switch (q.size(2)) {
    case 64:
        return launch<64>(ctx, args, grid);
    case 128:
        return launch<128>(ctx, args, grid);
    default:
        return launch<256>(ctx, args, grid);
    }
}

} // namespace ninfer::ops::cuda
