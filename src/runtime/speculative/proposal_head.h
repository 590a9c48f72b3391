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
// [0, N) in order (a count, or a list that is one), whose rows are a view of the head: no copy,
// and no id map (the local ids are the global ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/exec_context.h"

namespace ninfer::runtime {

// The ids of a shortlist spec (above) for a head of `vocab` rows; InvalidArgument naming the
// flag for an unreadable file, a malformed list, an id outside [0, vocab), a repeated id or
// an empty list. "" gives no ids (the full head).
std::vector<int32_t> parse_shortlist(const std::string& spec, int64_t vocab);

class ProposalHead {
public:
    // lm_head: the target's [V, H] head on ctx's device; shortlist: parse_shortlist's ids
    // (empty: the full head).
    ProposalHead(const ops::ExecContext& ctx, const TensorView& lm_head,
                 std::vector<int32_t> shortlist);
    bool shortlisted() const { return !ids_.empty(); }
    // Whether local ids differ from global ones (a shortlist other than [0, N) in order).
    bool maps_ids() const { return shortlisted() && !prefix_; }
    int64_t rows() const { return head_.size(0); } // the logit columns of a proposal
    const TensorView& weight() const { return head_; }
    // Local ids (columns of the shortlisted logits) to global ids, in place.
    void to_global(std::vector<int32_t>& ids) const;

private:
    std::vector<int32_t> ids_;
    bool prefix_ = false; // ids_ == [0, N): head_ is a view of the head's first N rows
    Tensor gathered_;
    TensorView head_;
};

} // namespace ninfer::runtime
