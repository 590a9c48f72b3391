// The f32 CUDA-core form of the chunked route of ops/gated_delta_rule.h (entry and the bf16
// tensor-core form: gated_delta_rule_chunked_tc.cu): the WY/UT form over chunks of C = 64 rows,
// all in fp32; taken by F32 activations and shapes the tensor-core form does not support. For a
// chunk with start state S0, cumulative log decay G_t (t = 0..n-1) and normalised k^, q^:
//   M[t, j] = beta_t e^{G_t - G_j} k^_t . k^_j (j < t)     A[t, j] = e^{G_t - G_j} q^_t . k^_j (j
//   <= t) (I + M) U' = diag(beta) V          (I + M) W = diag(beta e^G) K^     (forward
//   substitution) U = U' - W S0        out = diag(e^G) Q^ S0 + A U        S = e^{G_{n-1}} S0 +
//   sum_t e^{G_{n-1} - G_t} k^_t U_t^T
// chunk_prepare_kernel: one block per (sequence, chunk, value head), all chunks in parallel;
//   writes U', W and A to a workspace.
// chunk_scan_kernel: one block per (sequence, value head, 32 state columns), chunks in order;
//   the state's value columns are independent, so the column split needs no communication.
// Chosen for sequences of kGdnChunkedMinRows rows or more. Assumes dk, dv <= 128.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gated_delta_rule_chunked_tc.cuh"

namespace ninfer::ops::cuda {
namespace {

constexpr int kChunk = 64;
constexpr int kPrepareThreads = 256;
constexpr int kScanThreads = 256; // 16 x 16 thread tiles (see tile_x/tile_y)
constexpr int kScanCols = 32;     // state columns per scan block: 16 tx x 2

struct ChunkWork {
    float* U; // [T, Hv, dv]  U' of each row
    float* W; // [T, Hv, dk]
    float* A; // [T, Hv, kChunk]  row t's A[t, :] within its chunk
};

struct ChunkRange {
    int64_t r0; // first row
    int n;      // rows
};

// The rows of chunk c of sequence s (n = 0 past the sequence's end).
__device__ ChunkRange chunk_rows(const GdnArgs& a, int s, int c) {
    const int64_t begin = a.row_begin[s] + int64_t(c) * kChunk, end = a.row_begin[s + 1];
    return {begin, begin < end ? int(end - begin < kChunk ? end - begin : kChunk) : 0};
}

// Copies a rows x width matrix (width <= 128) with load(t, i) -> store(t, i, value): one warp
// per pair of rows, lanes over columns, all eight loads of a lane in flight before any store, so
// the loads' latency overlaps instead of adding up; no integer division.
template <typename Load, typename Store>
__device__ __forceinline__ void stage_matrix(int rows, int width, Load load, Store store) {
    const int lane = threadIdx.x & 31, warps = int(blockDim.x >> 5);
    for (int t0 = int(threadIdx.x >> 5) * 2; t0 < rows; t0 += warps * 2) {
        float v[2][4];
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const int t = t0 + r, i = lane + 32 * m;
                v[r][m] = t < rows && i < width ? load(t, i) : 0.0f;
            }
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const int t = t0 + r, i = lane + 32 * m;
                if (t < rows && i < width) store(t, i, v[r][m]);
            }
    }
}

// Rows [r0, r0 + n) of head `head` of a [T, H, d] tensor into dst[n][d + 1], as float.
template <typename T>
__device__ void stage_rows(const T* src, int64_t s0, int64_t s1, int head, int64_t r0, int n, int d,
                           float* dst) {
    stage_matrix(
        n, d, [&](int t, int i) { return to_float(src[(r0 + t) * s0 + head * s1 + i]); },
        [&](int t, int i, float x) { dst[t * (d + 1) + i] = x; });
}

// l2-normalises rows [0, n) of dst[.][d + 1] in place (sum of squares + 1e-6) and scales them by
// scale * (row_scale ? row_scale[t] : 1). One warp per row; call after a barrier.
__device__ void normalize_rows(float* dst, int n, int d, float scale,
                               const float* row_scale = nullptr) {
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int t = threadIdx.x >> 5; t < n; t += warps) {
        float* row = dst + t * (d + 1);
        float sum = 0.0f;
        for (int i = lane; i < d; i += 32) sum += row[i] * row[i];
        const float inv = rsqrtf(warp_sum(sum) + 1e-6f) * scale * (row_scale ? row_scale[t] : 1.0f);
        for (int i = lane; i < d; i += 32) row[i] *= inv;
    }
}

// Inclusive prefix sum of g over the chunk's rows into sG (warp 0; n <= 64).
__device__ void load_cumulative_decay(const GdnArgs& a, int h, int64_t r0, int n, float* sG) {
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    float x0 = lane < n ? a.g[(r0 + lane) * a.g_s0 + h] : 0.0f;
    float x1 = lane + 32 < n ? a.g[(r0 + lane + 32) * a.g_s0 + h] : 0.0f;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const float y0 = __shfl_up_sync(0xffffffffu, x0, off);
        const float y1 = __shfl_up_sync(0xffffffffu, x1, off);
        if (lane >= off) {
            x0 += y0;
            x1 += y1;
        }
    }
    x1 += __shfl_sync(0xffffffffu, x0, 31);
    if (lane < n) sG[lane] = x0;
    if (lane + 32 < n) sG[lane + 32] = x1;
}

// Thread tiles (256 threads = 16 x 16): thread (ty, tx) = (tid / 16, tid % 16). Register tiles
// give each thread independent FMA chains and reuse every shared-memory load several times.
__device__ __forceinline__ int tile_x() {
    return threadIdx.x % 16;
}
__device__ __forceinline__ int tile_y() {
    return threadIdx.x / 16;
}

// M (to shared memory) and A (to the workspace): t = 4 ty + a, j = 4 tx + b.
__device__ void chunk_products(const GdnArgs& a, const ChunkWork& w, int h, int64_t r0, int n,
                               const float* sK, const float* sQ, const float* sG,
                               const float* sBeta, float* sM) {
    const int dk = a.dk, t0 = 4 * tile_y(), j0 = 4 * tile_x();
    float kk[4][4] = {}, qk[4][4] = {};
    for (int i = 0; i < dk; ++i) {
        float kt[4], qt[4], kj[4];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            kt[x] = sK[(t0 + x) * (dk + 1) + i];
            qt[x] = sQ[(t0 + x) * (dk + 1) + i];
            kj[x] = sK[(j0 + x) * (dk + 1) + i];
        }
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
            for (int y = 0; y < 4; ++y) {
                kk[x][y] += kt[x] * kj[y];
                qk[x][y] += qt[x] * kj[y];
            }
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        const int t = t0 + x;
        if (t >= n) continue;
#pragma unroll
        for (int y = 0; y < 4; ++y) {
            const int j = j0 + y;
            const float decay = j <= t && j < n ? __expf(sG[t] - sG[j]) : 0.0f;
            sM[t * (kChunk + 1) + j] = j < t ? sBeta[t] * decay * kk[x][y] : 0.0f;
            w.A[((r0 + t) * a.Hv + h) * kChunk + j] = decay * qk[x][y];
        }
    }
}

template <typename T> __global__ void chunk_prepare_kernel(GdnArgs a, ChunkWork w, int max_chunks) {
    const int s = blockIdx.x / max_chunks, c = blockIdx.x % max_chunks, h = blockIdx.y;
    const ChunkRange ch = chunk_rows(a, s, c);
    if (ch.n == 0) return;
    const int n = ch.n, dk = a.dk, dv = a.dv, hk = h / a.ratio;
    extern __shared__ float smem[];
    float* sK = smem;                   // [kChunk][dk + 1]
    float* sQ = sK + kChunk * (dk + 1); // [kChunk][dk + 1]
    float* sV = sQ + kChunk * (dk + 1); // [kChunk][dv + 1]
    float* sM = sV + kChunk * (dv + 1); // [kChunk][kChunk + 1]
    float* sG = sM + kChunk * (kChunk + 1);
    float* sBeta = sG + kChunk;
    // Rows past n are zero, so the register tiles may read them.
    for (int e = threadIdx.x; e < (kChunk - n) * (dk + 1); e += blockDim.x) {
        sK[n * (dk + 1) + e] = 0.0f;
        sQ[n * (dk + 1) + e] = 0.0f;
    }
    stage_rows(static_cast<const T*>(a.k), a.k_s0, a.k_s1, hk, ch.r0, n, dk, sK);
    stage_rows(static_cast<const T*>(a.q), a.q_s0, a.q_s1, hk, ch.r0, n, dk, sQ);
    stage_rows(static_cast<const T*>(a.v), a.v_s0, a.v_s1, h, ch.r0, n, dv, sV);
    for (int t = threadIdx.x; t < n; t += blockDim.x)
        sBeta[t] = a.beta[(ch.r0 + t) * a.beta_s0 + h];
    load_cumulative_decay(a, h, ch.r0, n, sG);
    __syncthreads();
    normalize_rows(sK, n, dk, 1.0f);
    normalize_rows(sQ, n, dk, rsqrtf(float(dk)));
    __syncthreads();
    chunk_products(a, w, h, ch.r0, n, sK, sQ, sG, sBeta, sM);
    __syncthreads();
    // Forward substitution, one column per thread, in place: U' over sV's columns, W over sK's.
    // Four partial sums break the dependency chain of the inner product.
    for (int col = threadIdx.x; col < dv + dk; col += blockDim.x) {
        const bool is_u = col < dv;
        float* X = is_u ? sV + col : sK + (col - dv);
        const int stride = is_u ? dv + 1 : dk + 1;
        for (int t = 0; t < n; ++t) {
            const float* m = sM + t * (kChunk + 1);
            float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            int j = 0;
            for (; j + 4 <= t; j += 4)
#pragma unroll
                for (int x = 0; x < 4; ++x) p[x] += m[j + x] * X[(j + x) * stride];
            for (; j < t; ++j) p[0] += m[j] * X[j * stride];
            const float x = sBeta[t] * X[t * stride] * (is_u ? 1.0f : __expf(sG[t])) -
                            ((p[0] + p[1]) + (p[2] + p[3]));
            X[t * stride] = x;
            if (is_u)
                w.U[((ch.r0 + t) * a.Hv + h) * dv + col] = x;
            else
                w.W[((ch.r0 + t) * a.Hv + h) * dk + (col - dv)] = x;
        }
    }
}

struct ScanSmem {
    float *S, *K, *Q, *W, *U, *A, *G, *Kdecay;
};

__device__ ScanSmem scan_smem_layout(float* smem, int dk) {
    ScanSmem m;
    m.S = smem;                           // [dk][kScanCols]       state slice
    m.K = m.S + dk * kScanCols;           // [kChunk][dk + 1]      k^_t e^{G_last - G_t}
    m.Q = m.K + kChunk * (dk + 1);        // [kChunk][dk + 1]      q^
    m.W = m.Q + kChunk * (dk + 1);        // [kChunk][dk + 1]
    m.U = m.W + kChunk * (dk + 1);        // [kChunk][kScanCols + 1]  U' then U
    m.A = m.U + kChunk * (kScanCols + 1); // [kChunk][kChunk + 1]
    m.G = m.A + kChunk * (kChunk + 1);    // [kChunk]
    m.Kdecay = m.G + kChunk;              // [kChunk]
    return m;
}

// Loads chunk rows [r0, r0 + n) of k (decayed to the chunk's end), q, W, U' and A.
template <typename T>
__device__ void scan_load_chunk(const GdnArgs& a, const ChunkWork& w, int h, int c0, int nc,
                                int64_t r0, int n, const ScanSmem& m) {
    const int dk = a.dk, dv = a.dv, hk = h / a.ratio;
    load_cumulative_decay(a, h, r0, n, m.G);
    __syncthreads();
    for (int t = threadIdx.x; t < n; t += blockDim.x) m.Kdecay[t] = __expf(m.G[n - 1] - m.G[t]);
    for (int e = threadIdx.x; e < (kChunk - n) * (dk + 1); e += blockDim.x) {
        m.K[n * (dk + 1) + e] = 0.0f;
        m.Q[n * (dk + 1) + e] = 0.0f;
        m.W[n * (dk + 1) + e] = 0.0f;
    }
    __syncthreads();
    stage_rows(static_cast<const T*>(a.k), a.k_s0, a.k_s1, hk, r0, n, dk, m.K);
    stage_rows(static_cast<const T*>(a.q), a.q_s0, a.q_s1, hk, r0, n, dk, m.Q);
    stage_matrix(
        n, dk, [&](int t, int i) { return w.W[((r0 + t) * a.Hv + h) * dk + i]; },
        [&](int t, int i, float x) { m.W[t * (dk + 1) + i] = x; });
    stage_matrix(
        kChunk, kScanCols,
        [&](int t, int cc) {
            return t < n && cc < nc ? w.U[((r0 + t) * a.Hv + h) * dv + c0 + cc] : 0.0f;
        },
        [&](int t, int cc, float x) { m.U[t * (kScanCols + 1) + cc] = x; });
    stage_matrix(
        n, kChunk, [&](int t, int j) { return w.A[((r0 + t) * a.Hv + h) * kChunk + j]; },
        [&](int t, int j, float x) { m.A[t * (kChunk + 1) + j] = x; });
    __syncthreads();
    normalize_rows(m.K, n, dk, 1.0f, m.Kdecay);
    normalize_rows(m.Q, n, dk, rsqrtf(float(dk)));
    __syncthreads();
}

// One chunk: U = U' - W S0 and out = e^G Q^ S0 + A U (rows t = 4 ty + x, columns 2 tx + y), then
// S = e^{G_last} S0 + sum_t (k^_t e^{G_last - G_t}) U_t^T (state rows i = 8 ty + x).
template <typename T>
__device__ void scan_chunk(const GdnArgs& a, int h, int c0, int nc, int64_t r0, int n,
                           const ScanSmem& m) {
    const int dk = a.dk, dv = a.dv, t0 = 4 * tile_y(), cc0 = 2 * tile_x();
    float ws[4][2] = {}, qs[4][2] = {};
    for (int i = 0; i < dk; ++i) {
        const float s0 = m.S[i * kScanCols + cc0], s1 = m.S[i * kScanCols + cc0 + 1];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const float wv = m.W[(t0 + x) * (dk + 1) + i], qv = m.Q[(t0 + x) * (dk + 1) + i];
            ws[x][0] += wv * s0;
            ws[x][1] += wv * s1;
            qs[x][0] += qv * s0;
            qs[x][1] += qv * s1;
        }
    }
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 2; ++y) m.U[(t0 + x) * (kScanCols + 1) + cc0 + y] -= ws[x][y];
    __syncthreads();
    float o[4][2];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 2; ++y) o[x][y] = (t0 + x < n ? __expf(m.G[t0 + x]) : 0.0f) * qs[x][y];
    const int j_end = min(n, t0 + 4); // A[t, j] = 0 for j > t
    for (int j = 0; j < j_end; ++j) {
        const float u0 = m.U[j * (kScanCols + 1) + cc0], u1 = m.U[j * (kScanCols + 1) + cc0 + 1];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const float av = m.A[(t0 + x) * (kChunk + 1) + j];
            o[x][0] += av * u0;
            o[x][1] += av * u1;
        }
    }
    T* out = static_cast<T*>(a.out);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 2; ++y)
            if (t0 + x < n && cc0 + y < nc)
                out[((r0 + t0 + x) * a.Hv + h) * dv + c0 + cc0 + y] = from_float<T>(o[x][y]);
    const int i0 = 8 * tile_y();
    if (i0 < dk) {
        const float fade = __expf(m.G[n - 1]);
        float st[8][2];
#pragma unroll
        for (int x = 0; x < 8; ++x)
#pragma unroll
            for (int y = 0; y < 2; ++y)
                st[x][y] = i0 + x < dk ? fade * m.S[(i0 + x) * kScanCols + cc0 + y] : 0.0f;
        for (int t = 0; t < n; ++t) {
            const float u0 = m.U[t * (kScanCols + 1) + cc0],
                        u1 = m.U[t * (kScanCols + 1) + cc0 + 1];
#pragma unroll
            for (int x = 0; x < 8; ++x) {
                const float kv = i0 + x < dk ? m.K[t * (dk + 1) + i0 + x] : 0.0f;
                st[x][0] += kv * u0;
                st[x][1] += kv * u1;
            }
        }
        // Each thread owns these state entries; nobody else reads S until the next barrier.
#pragma unroll
        for (int x = 0; x < 8; ++x)
#pragma unroll
            for (int y = 0; y < 2; ++y)
                if (i0 + x < dk) m.S[(i0 + x) * kScanCols + cc0 + y] = st[x][y];
    }
    __syncthreads();
}

template <typename T> __global__ void chunk_scan_kernel(GdnArgs a, ChunkWork w) {
    const int s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * kScanCols;
    const int dk = a.dk, dv = a.dv;
    const int nc = min(kScanCols, dv - c0);
    extern __shared__ float smem[];
    const ScanSmem m = scan_smem_layout(smem, dk);
    const GdnStateRef state =
        GdnStateRef{a.state, a.state_bf16}.at((int64_t(a.slots[s]) * a.Hv + h) * dk * dv);
    for (int e = threadIdx.x; e < dk * kScanCols; e += blockDim.x) {
        const int i = e / kScanCols, cc = e % kScanCols;
        m.S[e] = cc < nc ? state.load(int64_t(i) * dv + c0 + cc) : 0.0f;
    }
    for (int c = 0;; ++c) {
        const ChunkRange ch = chunk_rows(a, s, c);
        if (ch.n == 0) break;
        scan_load_chunk<T>(a, w, h, c0, nc, ch.r0, ch.n, m);
        scan_chunk<T>(a, h, c0, nc, ch.r0, ch.n, m);
    }
    for (int e = threadIdx.x; e < dk * kScanCols; e += blockDim.x) {
        const int i = e / kScanCols, cc = e % kScanCols;
        if (cc < nc) state.store(int64_t(i) * dv + c0 + cc, m.S[e]);
    }
}

size_t prepare_smem(int dk, int dv) {
    return sizeof(float) *
           (2 * kChunk * (dk + 1) + kChunk * (dv + 1) + kChunk * (kChunk + 1) + 2 * kChunk);
}
size_t scan_smem(int dk) {
    return sizeof(float) * (dk * kScanCols + 3 * kChunk * (dk + 1) + kChunk * (kScanCols + 1) +
                            kChunk * (kChunk + 1) + 2 * kChunk);
}

} // namespace

bool gated_delta_rule_chunked_fp32_fits(const ExecContext& ctx, const GdnArgs& a) {
    const int device = ctx.device.index;
    return shared_memory_fits(device, prepare_smem(a.dk, a.dv)) &&
           shared_memory_fits(device, scan_smem(a.dk));
}

template <typename T>
void gated_delta_rule_chunked_fp32(const ExecContext& ctx, const GdnArgs& a, int num_seqs,
                                   int num_rows, int max_rows_per_seq) {
    Allocator& alloc = allocator(ctx.device);
    Tensor U = Tensor::empty(alloc, DType::F32, {num_rows, a.Hv, a.dv});
    Tensor W = Tensor::empty(alloc, DType::F32, {num_rows, a.Hv, a.dk});
    Tensor A = Tensor::empty(alloc, DType::F32, {num_rows, a.Hv, kChunk});
    const ChunkWork work{U.ptr<float>(), W.ptr<float>(), A.ptr<float>()};
    const int max_chunks = (max_rows_per_seq + kChunk - 1) / kChunk;
    const size_t prep = prepare_smem(a.dk, a.dv), scan = scan_smem(a.dk);
    // Over 48 KiB of shared memory needs the opt-in, per device: set at every launch (about a
    // microsecond on the host, next to kernels of a millisecond).
    opt_in_shared_memory(ctx, chunk_prepare_kernel<T>, prep, "chunk_prepare_kernel");
    opt_in_shared_memory(ctx, chunk_scan_kernel<T>, scan, "chunk_scan_kernel");
    chunk_prepare_kernel<T><<<dim3(unsigned(num_seqs * max_chunks), unsigned(a.Hv)),
                              kPrepareThreads, prep, stream_of(ctx)>>>(a, work, max_chunks);
    check_launch("chunk_prepare_kernel");
    chunk_scan_kernel<T>
        <<<dim3(unsigned(num_seqs), unsigned(a.Hv), unsigned((a.dv + kScanCols - 1) / kScanCols)),
           kScanThreads, scan, stream_of(ctx)>>>(a, work);
    check_launch("chunk_scan_kernel");
}

template void gated_delta_rule_chunked_fp32<float>(const ExecContext&, const GdnArgs&, int, int,
                                                   int);
template void gated_delta_rule_chunked_fp32<__nv_bfloat16>(const ExecContext&, const GdnArgs&, int,
                                                           int, int);

} // namespace ninfer::ops::cuda
