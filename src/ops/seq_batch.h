// SeqBatch: how the T rows of a ragged batch divide into sequences, for the ops that read or
// write per-sequence state (conv1d, gated delta rule, paged attention).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ninfer::ops {

// Sequence s owns rows [row_begin[s], row_begin[s+1]). Its first row sits at position
// pos_begin[s]: that many earlier tokens are already in its KV cache and GDN state. Row r of
// sequence s is at position pos_begin[s] + (r - row_begin[s]).
// The device views hold the same values as the host arrays; on the CPU they are the same memory.
//
// Per-row state snapshots (speculative verification): when host_snapshot_row is set and
// host_snapshot_row[s] >= 0, the GDN ops (conv1d, gated delta rule, gdn_core) also write the
// state after row i of sequence s, for i < rows(s) - 1, into state row host_snapshot_row[s] + i
// (the state after the last row still goes to the sequence's own slot). Rolling back to "i + 1
// rows done" is then a copy of that row. Sequences with snapshots have at most
// kMaxSnapshotRows rows.
inline constexpr int32_t kMaxSnapshotRows = 16;

struct SeqBatch {
    int32_t num_seqs = 0;
    int32_t num_rows = 0;
    int32_t max_rows_per_seq = 0;
    int32_t max_context = 0; // max over s of pos_begin[s] + rows of s

    const int32_t* host_row_begin = nullptr;   // [S+1]
    const int32_t* host_pos_begin = nullptr;   // [S]
    const int32_t* host_state_slot = nullptr;  // [S] GDN state slot
    const int32_t* host_block_table = nullptr; // [S, block_table_stride] KV block ids
    int32_t block_table_stride = 0;
    int32_t block_size = 0; // tokens per KV block

    TensorView row_begin;   // [S+1] I32 on the execution device
    TensorView pos_begin;   // [S] I32
    TensorView state_slot;  // [S] I32
    TensorView block_table; // [S, block_table_stride] I32

    const int32_t* host_snapshot_row = nullptr; // [S] or nullptr (no snapshots)
    TensorView snapshot_row;                    // [S] I32, defined iff host_snapshot_row is

    bool has_snapshots() const { return host_snapshot_row != nullptr; }

    int32_t rows(int32_t s) const { return host_row_begin[s + 1] - host_row_begin[s]; }
};

} // namespace ninfer::ops
