// Implements the chunked route of ops/gated_delta_rule.h on CUDA: the WY/UT form over chunks of
// C = 64 rows, all in fp32. For a chunk with start state S0, cumulative log decay G_t (t = 0..n-1)
// and normalised k^, q^:
//   M[t, j] = beta_t e^{G_t - G_j} k^_t . k^_j (j < t)     A[t, j] = e^{G_t - G_j} q^_t . k^_j (j <= t)
//   (I + M) U' = diag(beta) V          (I + M) W = diag(beta e^G) K^     (forward substitution)
//   U = U' - W S0        out = diag(e^G) Q^ S0 + A U        S = e^{G_{n-1}} S0 + sum_t e^{G_{n-1} - G_t} k^_t U_t^T
// chunk_prepare_kernel: one block per (sequence, chunk, value head), all chunks in parallel;
//   writes U', W and A to a workspace.
// chunk_scan_kernel: one block per (sequence, value head, 16 state columns), chunks in order;
//   the state's value columns are independent, so the column split needs no communication.
// Chosen for sequences of kGdnChunkedMinRows rows or more. Assumes dk, dv <= 128.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gated_delta_rule_chunked.h"

namespace ninfer::ops::cuda {
namespace {

constexpr int kChunk = 64;
constexpr int kPrepareThreads = 256;
constexpr int kScanThreads = 128;
constexpr int kScanCols = 16; // state columns per scan block

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

// Loads rows [r0, r0 + n) of a [T, H, d] tensor's head `head` into dst[n][d + 1], l2-normalised
// (sum of squares + 1e-6) and scaled. One warp per row.
template <typename T>
__device__ void load_rows_normalized(const T* src, int64_t s0, int64_t s1, int head, int64_t r0,
                                     int n, int d, float scale, float* dst) {
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int t = threadIdx.x >> 5; t < n; t += warps) {
        const T* row = src + (r0 + t) * s0 + head * s1;
        float sum = 0.0f;
        for (int i = lane; i < d; i += 32) {
            const float x = to_float(row[i]);
            dst[t * (d + 1) + i] = x;
            sum += x * x;
        }
        const float inv = rsqrtf(warp_sum(sum) + 1e-6f) * scale;
        __syncwarp();
        for (int i = lane; i < d; i += 32) dst[t * (d + 1) + i] *= inv;
    }
}

// Inclusive prefix sum of g over the chunk's rows into sG (one warp; n <= 64).
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
    load_rows_normalized(static_cast<const T*>(a.k), a.k_s0, a.k_s1, hk, ch.r0, n, dk, 1.0f, sK);
    load_rows_normalized(static_cast<const T*>(a.q), a.q_s0, a.q_s1, hk, ch.r0, n, dk,
                         rsqrtf(float(dk)), sQ);
    const T* v = static_cast<const T*>(a.v);
    for (int e = threadIdx.x; e < n * dv; e += blockDim.x) {
        const int t = e / dv, i = e % dv;
        sV[t * (dv + 1) + i] = to_float(v[(ch.r0 + t) * a.v_s0 + h * a.v_s1 + i]);
    }
    for (int t = threadIdx.x; t < n; t += blockDim.x) sBeta[t] = a.beta[(ch.r0 + t) * a.beta_s0 + h];
    load_cumulative_decay(a, h, ch.r0, n, sG);
    __syncthreads();
    // M into shared memory, A to the workspace. Consecutive threads take consecutive j: the
    // padded rows put sK[j][i] in distinct banks.
    for (int e = threadIdx.x; e < n * kChunk; e += blockDim.x) {
        const int t = e / kChunk, j = e % kChunk;
        float kk = 0.0f, qk = 0.0f;
        if (j <= t && j < n)
            for (int i = 0; i < dk; ++i) {
                const float kj = sK[j * (dk + 1) + i];
                kk += sK[t * (dk + 1) + i] * kj;
                qk += sQ[t * (dk + 1) + i] * kj;
            }
        const float decay = j <= t && j < n ? __expf(sG[t] - sG[j]) : 0.0f;
        sM[t * (kChunk + 1) + j] = j < t ? sBeta[t] * decay * kk : 0.0f;
        w.A[((ch.r0 + t) * a.Hv + h) * kChunk + j] = decay * qk;
    }
    __syncthreads();
    // Forward substitution, one column per thread, in place: U' over sV's columns, W over sK's.
    for (int col = threadIdx.x; col < dv + dk; col += blockDim.x) {
        const bool is_u = col < dv;
        float* X = is_u ? sV + col : sK + (col - dv);
        const int stride = is_u ? dv + 1 : dk + 1;
        for (int t = 0; t < n; ++t) {
            float x = sBeta[t] * X[t * stride] * (is_u ? 1.0f : __expf(sG[t]));
            for (int j = 0; j < t; ++j) x -= sM[t * (kChunk + 1) + j] * X[j * stride];
            X[t * stride] = x;
            if (is_u)
                w.U[((ch.r0 + t) * a.Hv + h) * dv + col] = x;
            else
                w.W[((ch.r0 + t) * a.Hv + h) * dk + (col - dv)] = x;
        }
    }
}

template <typename T> __global__ void chunk_scan_kernel(GdnArgs a, ChunkWork w) {
    const int s = blockIdx.x, h = blockIdx.y, c0 = blockIdx.z * kScanCols;
    const int dk = a.dk, dv = a.dv, hk = h / a.ratio;
    const int nc = min(kScanCols, dv - c0);
    extern __shared__ float smem[];
    float* sS = smem;                    // [dk][kScanCols]   state slice
    float* sK = sS + dk * kScanCols;     // [kChunk][dk + 1]  k^
    float* sQ = sK + kChunk * (dk + 1);  // [kChunk][dk + 1]  q^
    float* sW = sQ + kChunk * (dk + 1);  // [kChunk][dk + 1]
    float* sU = sW + kChunk * (dk + 1);  // [kChunk][kScanCols + 1]  U' then U
    float* sQS = sU + kChunk * (kScanCols + 1); // [kChunk][kScanCols + 1]
    float* sA = sQS + kChunk * (kScanCols + 1); // [kChunk][kChunk + 1]
    float* sG = sA + kChunk * (kChunk + 1);
    float* state = a.state + (int64_t(a.slots[s]) * a.Hv + h) * dk * dv;
    for (int e = threadIdx.x; e < dk * kScanCols; e += blockDim.x) {
        const int i = e / kScanCols, cc = e % kScanCols;
        sS[e] = cc < nc ? state[int64_t(i) * dv + c0 + cc] : 0.0f;
    }
    T* out = static_cast<T*>(a.out);
    for (int c = 0;; ++c) {
        const ChunkRange ch = chunk_rows(a, s, c);
        if (ch.n == 0) break;
        const int n = ch.n;
        load_rows_normalized(static_cast<const T*>(a.k), a.k_s0, a.k_s1, hk, ch.r0, n, dk, 1.0f,
                             sK);
        load_rows_normalized(static_cast<const T*>(a.q), a.q_s0, a.q_s1, hk, ch.r0, n, dk,
                             rsqrtf(float(dk)), sQ);
        for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
            const int t = e / dk, i = e % dk;
            sW[t * (dk + 1) + i] = w.W[((ch.r0 + t) * a.Hv + h) * dk + i];
        }
        for (int e = threadIdx.x; e < n * kScanCols; e += blockDim.x) {
            const int t = e / kScanCols, cc = e % kScanCols;
            sU[t * (kScanCols + 1) + cc] =
                cc < nc ? w.U[((ch.r0 + t) * a.Hv + h) * dv + c0 + cc] : 0.0f;
        }
        for (int e = threadIdx.x; e < n * kChunk; e += blockDim.x) {
            const int t = e / kChunk, j = e % kChunk;
            sA[t * (kChunk + 1) + j] = w.A[((ch.r0 + t) * a.Hv + h) * kChunk + j];
        }
        load_cumulative_decay(a, h, ch.r0, n, sG);
        __syncthreads();
        // U = U' - W S0 and Q^ S0, sharing the reads of the state.
        for (int e = threadIdx.x; e < n * kScanCols; e += blockDim.x) {
            const int t = e / kScanCols, cc = e % kScanCols;
            float ws = 0.0f, qs = 0.0f;
            for (int i = 0; i < dk; ++i) {
                const float st = sS[i * kScanCols + cc];
                ws += sW[t * (dk + 1) + i] * st;
                qs += sQ[t * (dk + 1) + i] * st;
            }
            sU[t * (kScanCols + 1) + cc] -= ws;
            sQS[t * (kScanCols + 1) + cc] = qs;
        }
        __syncthreads();
        // out = e^G Q^ S0 + A U.
        for (int e = threadIdx.x; e < n * kScanCols; e += blockDim.x) {
            const int t = e / kScanCols, cc = e % kScanCols;
            if (cc >= nc) continue;
            float o = __expf(sG[t]) * sQS[t * (kScanCols + 1) + cc];
            for (int j = 0; j <= t; ++j) o += sA[t * (kChunk + 1) + j] * sU[j * (kScanCols + 1) + cc];
            out[((ch.r0 + t) * a.Hv + h) * dv + c0 + cc] = from_float<T>(o);
        }
        // S = e^{G_last} S0 + sum_t e^{G_last - G_t} k^_t U_t^T (sS is not read above any more
        // after the barrier, and each element is owned by one thread here).
        const float g_last = sG[n - 1];
        for (int e = threadIdx.x; e < dk * kScanCols; e += blockDim.x) {
            const int i = e / kScanCols, cc = e % kScanCols;
            float acc = __expf(g_last) * sS[e];
            for (int t = 0; t < n; ++t)
                acc += __expf(g_last - sG[t]) * sK[t * (dk + 1) + i] * sU[t * (kScanCols + 1) + cc];
            sS[e] = acc;
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < dk * kScanCols; e += blockDim.x) {
        const int i = e / kScanCols, cc = e % kScanCols;
        if (cc < nc) state[int64_t(i) * dv + c0 + cc] = sS[e];
    }
}

size_t prepare_smem(int dk, int dv) {
    return sizeof(float) * (2 * kChunk * (dk + 1) + kChunk * (dv + 1) + kChunk * (kChunk + 1) +
                            2 * kChunk);
}
size_t scan_smem(int dk) {
    return sizeof(float) * (dk * kScanCols + 3 * kChunk * (dk + 1) +
                            2 * kChunk * (kScanCols + 1) + kChunk * (kChunk + 1) + kChunk);
}

} // namespace

template <typename T>
void gated_delta_rule_chunked(const ExecContext& ctx, const GdnArgs& a, int num_seqs,
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
    check(cudaFuncSetAttribute(chunk_prepare_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(prep)),
          "chunk_prepare_kernel: shared memory attribute");
    check(cudaFuncSetAttribute(chunk_scan_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(scan)),
          "chunk_scan_kernel: shared memory attribute");
    chunk_prepare_kernel<T>
        <<<dim3(unsigned(num_seqs * max_chunks), unsigned(a.Hv)), kPrepareThreads, prep,
           stream_of(ctx)>>>(a, work, max_chunks);
    check_launch("chunk_prepare_kernel");
    chunk_scan_kernel<T><<<dim3(unsigned(num_seqs), unsigned(a.Hv),
                                unsigned((a.dv + kScanCols - 1) / kScanCols)),
                           kScanThreads, scan, stream_of(ctx)>>>(a, work);
    check_launch("chunk_scan_kernel");
}

template void gated_delta_rule_chunked<float>(const ExecContext&, const GdnArgs&, int, int, int);
template void gated_delta_rule_chunked<__nv_bfloat16>(const ExecContext&, const GdnArgs&, int, int,
                                                      int);

} // namespace ninfer::ops::cuda
