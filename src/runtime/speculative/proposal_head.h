// ProposalHead: the head a DFlash drafter proposes through. Either the target's lm_head whole
// (z-lab's reference; the default), or a shortlist of its rows with the map back to global ids
// (upstream's "optimized" head): the proposal reads N of the V rows, so a 131,072-id shortlist
// of the 35B's 248,320-row head halves the proposal's largest read. Drafts outside the
// shortlist are never proposed; verification, and so the output, is unchanged either way.
//
// The shortlist (EngineOptions::draft_shortlist, `--draft-shortlist`):
//   ""          the full head;
//   "N"         ids [0, N): byte-level BPE vocabularies number tokens in merge order, which
//               roughly follows frequency, so the lowest ids are the commonest (special tokens,
//               numbered last, are then never drafted);
//   a path      a JSON array of distinct ids (tools/dflash/make_shortlist.py writes one from
//               the target's own text: its most frequent ids and every added token).
// The gathered rows cost N H elements of the activation dtype on the device, except for ids
// [0, N) in order (a count, or a list that is one), whose rows are a view of the head where this
// device holds them: no copy, and no id map (the local ids are the global ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/qwen3_5.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

// The ids of a shortlist spec (above) for a head of `vocab` rows; InvalidArgument naming the
// flag for an unreadable file, a malformed list, an id outside [0, vocab), a repeated id or
// an empty list. "" gives no ids (the full head).
std::vector<int32_t> parse_shortlist(const std::string& spec, int64_t vocab);

class ProposalHead {
public:
    // model: the target, whose lm_head is projected onto; shortlist: parse_shortlist's ids
    // (empty: the full head). Under tensor parallelism the full head stays split over the ranks
    // (project runs on every rank), and a shortlist's rows are gathered onto ctx's device.
    ProposalHead(const ops::ExecContext& ctx, model::Qwen35Model& model,
                 std::vector<int32_t> shortlist);
    bool shortlisted() const { return !ids_.empty(); }
    // Whether local ids differ from global ones (a shortlist other than [0, N) in order).
    bool maps_ids() const { return shortlisted() && !prefix_; }
    int64_t rows() const { return rows_; } // the logit columns of a proposal
    // Whether the head's rows were copied (a shortlist this device does not hold as a prefix:
    // rows() x H elements of the activation dtype).
    bool copies_rows() const { return gathered_.defined(); }
    // logits [n, rows()] F32 = rows [n, H] . head^T (no final norm). Capturable.
    void project(const ops::ExecContext& ctx, const TensorView& rows,
                 const TensorView& logits) const;
    // Local ids (columns of the shortlisted logits) to global ids, in place.
    void to_global(std::vector<int32_t>& ids) const;

private:
    model::Qwen35Model* model_;
    std::vector<int32_t> ids_;
    bool prefix_ = false; // ids_ == [0, N)
    int64_t rows_ = 0;
    Tensor gathered_;     // the shortlist's rows, where the head is not a view of them
    TensorView head_;     // this device's [rows_, H] head; empty: the model's split head
};

} // namespace ninfer::runtime
