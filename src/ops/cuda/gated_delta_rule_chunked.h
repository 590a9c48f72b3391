// The chunked (WY/UT) route of gated_delta_rule on CUDA (gated_delta_rule_chunked.cu) and the
// argument block both routes share (the route boundary is also read by the tests).
#pragma once

#include <cstdint>

#include "ops/exec_context.h"

namespace ninfer::ops::cuda {

struct GdnArgs {
    const void *q, *k, *v;
    int64_t q_s0, q_s1, k_s0, k_s1, v_s0, v_s1;
    const float *g, *beta;
    int64_t g_s0, beta_s0;
    const int32_t *row_begin, *slots;
    const int32_t* snapshot_rows; // [S] or nullptr: per-row states (seq_batch.h), recurrent only
    void* state;      // [slots, Hv, dk, dv], F32 or BF16 (state_bf16): gdn_state.cuh
    bool state_bf16;
    void* out;    // [T, Hv, dv] contiguous
    int Hv, ratio, dk, dv;
};

// Rows of one sequence from which Auto takes the chunked route in the built-in route table
// (ops/route_table.h; `ninfer tune` measures it per GPU). Below, the token-serial kernel (about
// two microseconds a row) beats the two chunk passes' fixed cost.
constexpr int kGdnChunkedMinRows = 32;

// Whether ctx's device can run the chunked route for these arguments: the shared memory per
// block its passes need (bf16 tensor cores 160 KB, f32 138 KB at dk = dv = 128) is there on
// sm_80, sm_90 and sm_100, not on sm_86 / sm_89 / sm_120 (99 KB) or in portable mode, where
// gated_delta_rule takes the recurrence (for GdnAlgo::Chunked as well: the same contract).
template <typename T> bool gated_delta_rule_chunked_fits(const ExecContext& ctx, const GdnArgs& a);

// The tensor-core scan's warps per block (4: 64 state columns, 8: all 128) for a batch of
// num_seqs sequences of Hv value heads (gated_delta_rule_chunked_scan.cu says when 8).
int gdn_tc_scan_warps(const ExecContext& ctx, int num_seqs, int Hv);
// Whether the 4-warp cases run on the dk-split blocks instead (8 warps on 64 columns, two a
// column group, each with half of the state rows): 0 no, 1 yes, 2 yes with its test's sabotage.
// Yes where the device has their shared memory, unless NINFER_GDN_SCAN_SPLIT_DK=0
// (gated_delta_rule_chunked_scan_split.cu).
int gdn_tc_scan_split_dk(const ExecContext& ctx);

// gated_delta_rule's contract (ops/gated_delta_rule.h) by chunks of 64 rows; dk, dv <= 128.
// T is float or __nv_bfloat16 (the activation type of q, k, v and out); needs
// gated_delta_rule_chunked_fits.
template <typename T>
void gated_delta_rule_chunked(const ExecContext& ctx, const GdnArgs& a, int num_seqs, int num_rows,
                              int max_rows_per_seq);

} // namespace ninfer::ops::cuda
