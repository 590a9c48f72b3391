// Implements ops/gated_delta_rule.h on CUDA.
// gdn_gates: elementwise over [T, Hv].
// gated_delta_rule (recurrent route, any T): the state's value columns are independent, so one
// block owns 32 columns of one (sequence, value head) and keeps S[:, col] in registers for the
// whole sequence, split by rows over dk / 32 warps; q and k are normalised in every warp and
// broadcast by shuffles.
// Chosen for decode and short chunks (the route table's gated_delta_rule decision; built in:
// under kGdnChunkedMinRows rows per sequence); longer ones take the chunked route (gated_delta_rule_chunked.cu) where the device has the shared memory it
// needs (gated_delta_rule_chunked_fits), the recurrence elsewhere. Assumes dk <= 128.
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gated_delta_rule_chunked.h"
#include "ops/cuda/gdn_state.cuh"
#include "ops/route_table.h"

namespace ninfer::ops::cuda {
namespace {

template <typename T>
__global__ void gates_kernel(RowView a, RowView b, const T* A_log, const T* dt_bias, int64_t Hv,
                             RowView g, RowView beta) {
    pdl_wait_and_release();
    const int64_t t = blockIdx.x;
    for (int64_t h = threadIdx.x; h < Hv; h += blockDim.x) {
        const float av = to_float(a.row<T>(t)[h]) + to_float(dt_bias[h]);
        const float bv = to_float(b.row<T>(t)[h]);
        const float softplus = av > 20.0f ? av : log1pf(__expf(av)); // torch's threshold 20
        g.row<float>(t)[h] = -__expf(to_float(A_log[h])) * softplus;
        // HF computes beta in the activation dtype.
        beta.row<float>(t)[h] = to_float(from_float<T>(1.0f / (1.0f + __expf(-bv))));
    }
}

// Loads a dk-vector (lane l holds elements l, l+32, ...) and l2-normalises it times `scale`.
template <typename T, int DK>
__device__ void load_normalized(const T* src, int dk, float scale, float (&out)[DK / 32]) {
    const int lane = threadIdx.x & 31;
    float sum = 0.0f;
#pragma unroll
    for (int m = 0; m < DK / 32; ++m) {
        const int i = lane + 32 * m;
        out[m] = i < dk ? to_float(src[i]) : 0.0f;
        sum += out[m] * out[m];
    }
    const float inv = rsqrtf(warp_sum(sum) + 1e-6f) * scale; // eps on the sum of squares
#pragma unroll
    for (int m = 0; m < DK / 32; ++m) out[m] *= inv;
}

// One block per (sequence, value head, 32 state columns); warp w of the DK / 32 warps keeps rows
// [32w, 32w + 32) of those columns in registers (lane = column), so a decode step spreads the
// state's 64 KB per head over 4 warps instead of 1. The two dot products over the key dim (S^T k
// and S^T q) are summed across the warps through shared memory.
template <typename T, int DK> __global__ void __launch_bounds__(DK) recurrent_kernel(GdnArgs a) {
    pdl_wait_and_release();
    constexpr int kWarpsPerBlock = DK / 32;
    const int s = blockIdx.x / a.Hv, h = blockIdx.x % a.Hv, hk = h / a.ratio;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int col = blockIdx.y * 32 + lane, row0 = warp * 32;
    const bool active = col < a.dv;
    const GdnStateRef state{a.state, a.state_bf16};
    const GdnStateRef st = state.at(((int64_t(a.slots[s]) * a.Hv + h) * a.dk + row0) * a.dv + col);
    const int32_t snap = a.snapshot_rows ? a.snapshot_rows[s] : -1;
    float S[32];
#pragma unroll
    for (int j = 0; j < 32; ++j)
        S[j] = (active && row0 + j < a.dk) ? st.load(int64_t(j) * a.dv) : 0.0f;
    __shared__ float part_kv[kWarpsPerBlock][32], part_o[kWarpsPerBlock][32];
    const float q_scale = rsqrtf(float(a.dk));
    const T* qb = static_cast<const T*>(a.q);
    const T* kb = static_cast<const T*>(a.k);
    const T* vb = static_cast<const T*>(a.v);
    T* ob = static_cast<T*>(a.out);
    for (int64_t r = a.row_begin[s]; r < a.row_begin[s + 1]; ++r) {
        float kr[DK / 32], qr[DK / 32]; // the whole normalised vectors; this warp uses [warp]
        load_normalized<T, DK>(kb + r * a.k_s0 + hk * a.k_s1, a.dk, 1.0f, kr);
        load_normalized<T, DK>(qb + r * a.q_s0 + hk * a.q_s1, a.dk, q_scale, qr);
        const float decay = __expf(a.g[r * a.g_s0 + h]);
        const float beta = a.beta[r * a.beta_s0 + h];
        const float v = active ? to_float(vb[r * a.v_s0 + h * a.v_s1 + col]) : 0.0f;
        const float k_mine = kr[warp], q_mine = qr[warp]; // element row0 + lane
        float kv = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) kv += S[j] * __shfl_sync(0xffffffffu, k_mine, j);
        part_kv[warp][lane] = kv;
        __syncthreads();
        kv = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarpsPerBlock; ++w) kv += part_kv[w][lane];
        const float u = beta * (v - decay * kv); // the delta uses the decayed state
        float o = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            S[j] = decay * S[j] + __shfl_sync(0xffffffffu, k_mine, j) * u;
            o += S[j] * __shfl_sync(0xffffffffu, q_mine, j); // read after the update
        }
        part_o[warp][lane] = o;
        __syncthreads();
        if (warp == 0 && active) {
            o = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarpsPerBlock; ++w) o += part_o[w][lane];
            ob[(r * a.Hv + h) * a.dv + col] = from_float<T>(o);
        }
        if (snap >= 0 && r + 1 < a.row_begin[s + 1] && active) { // the state after row r
            const GdnStateRef out = state.at(
                (((int64_t(snap) + (r - a.row_begin[s])) * a.Hv + h) * a.dk + row0) * a.dv + col);
#pragma unroll
            for (int j = 0; j < 32; ++j)
                if (row0 + j < a.dk) out.store(int64_t(j) * a.dv, S[j]);
        }
    }
    if (!active) return;
#pragma unroll
    for (int j = 0; j < 32; ++j)
        if (row0 + j < a.dk) st.store(int64_t(j) * a.dv, S[j]);
}

template <typename T, int DK>
void launch_recurrent(const ExecContext& ctx, const GdnArgs& a, int seqs) {
    const dim3 grid(unsigned(seqs * a.Hv), unsigned((a.dv + 31) / 32));
    launch_pdl(ctx, recurrent_kernel<T, DK>, grid, DK, 0, a);
}

} // namespace

void gdn_gates(const ExecContext& ctx, const TensorView& a, const TensorView& b,
               const TensorView& A_log, const TensorView& dt_bias, const TensorView& g,
               const TensorView& beta) {
    const int64_t T = a.size(0), Hv = a.size(1);
    if (T == 0) return;
    dispatch_float(a.dtype, "gdn_gates", [&](auto tag) {
        using E = decltype(tag);
        launch_pdl(ctx, gates_kernel<E>, unsigned(T), 64, 0, row_view(a), row_view(b),
                   A_log.ptr<E>(), dt_bias.ptr<E>(), Hv, row_view(g), row_view(beta));
    });
    check_launch("gates_kernel");
}

void gated_delta_rule(const ExecContext& ctx, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& g, const TensorView& beta,
                      const SeqBatch& batch, const TensorView& state, const TensorView& out,
                      GdnAlgo algo) {
    const int dk = int(q.size(2));
    require(dk <= 128, "gated_delta_rule: CUDA supports key head dim <= 128, got ", dk);
    if (batch.num_seqs == 0 || q.size(0) == 0) return;
    GdnArgs a{q.data,
              k.data,
              v.data,
              q.stride[0],
              q.stride[1],
              k.stride[0],
              k.stride[1],
              v.stride[0],
              v.stride[1],
              g.ptr<float>(),
              beta.ptr<float>(),
              g.stride[0],
              beta.stride[0],
              batch.row_begin.ptr<int32_t>(),
              batch.state_slot.ptr<int32_t>(),
              batch.has_snapshots() ? batch.snapshot_row.ptr<int32_t>() : nullptr,
              state.data,
              state.dtype == DType::BF16,
              out.data,
              int(v.size(1)),
              int(v.size(1) / q.size(1)),
              dk,
              int(v.size(2))};
    // Per-row snapshots need the recurrence (their sequences are short: kMaxSnapshotRows).
    const bool chunked =
        !batch.has_snapshots() &&
        (algo == GdnAlgo::Chunked ||
         (algo == GdnAlgo::Auto &&
          active_route_table().route(RouteId::GatedDeltaRule, batch.max_rows_per_seq) ==
              kRouteChunked &&
          a.dv <= 128));
    require(!chunked || a.dv <= 128,
            "gated_delta_rule: the CUDA chunked route supports value "
            "head dim <= 128, got ",
            a.dv);
    dispatch_float(q.dtype, "gated_delta_rule", [&](auto tag) {
        using E = decltype(tag);
        if (chunked && gated_delta_rule_chunked_fits<E>(ctx, a))
            gated_delta_rule_chunked<E>(ctx, a, batch.num_seqs, int(q.size(0)),
                                        batch.max_rows_per_seq);
        else if (dk <= 32)
            launch_recurrent<E, 32>(ctx, a, batch.num_seqs);
        else if (dk <= 64)
            launch_recurrent<E, 64>(ctx, a, batch.num_seqs);
        else
            launch_recurrent<E, 128>(ctx, a, batch.num_seqs);
    });
    check_launch("gated_delta_rule recurrent_kernel");
}

} // namespace ninfer::ops::cuda
