// DraftPolicy: how many draft tokens the decoding sequences of a step verify (the scheduler asks
// it once per step).
//
// Fixed K: always K. Auto: for the step's decode batch B, the K in [0, max] that maximises the
// expected committed tokens per second of the step,
//   tokens(K) = 1 + sum_{i=1..K} prod_{j<=i} a_j
//   (a_j: the measured acceptance of draft position j given that the earlier ones were
//   accepted, starting from a prior worth kPriorRounds rounds at kPriorAcceptance, and scored
//   optimistically while rounds are few: as if kOptimisticRounds more had accepted it, so that
//   a few early rejections do not turn drafting off for good),
//   time(B, K): the measured step time for B's bucket (powers of two) and K (an average that
//   follows changes).
// The first step of each (bucket, K) is not counted (it warms kernels and captures graphs). The
// search climbs: an untried neighbour of the best K (best + 1 first, then best - 1) is tried
// while it could beat the best (its bound: tokens(K) over a floor of its step time, since
// drafting never makes a step faster), so a request pays the warm-up of the Ks near the best
// only, not of the whole range. Every kReexploreSteps steps of a bucket another K (plain
// decoding when the best drafts, else the best's neighbours) is measured again, so the choice
// follows acceptance and load.
// K = 0 is plain decoding: the policy turns speculation off whenever it does not pay. Once a
// bucket has settled on 0 (the climb is done, and either 16 rounds of evidence say so or K = 1
// costs two plain steps, so that no acceptance could pay for it; until then K = 1 is measured
// again every 8 steps), aligned() is false: the drafter skips the MTP alignment of plain decode
// rows (its cost would make plain decoding slower than without --spec), and the sequences it
// skipped decode plainly to their end.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace ninfer::runtime {

class DraftPolicy {
public:
    // fixed: 1..8 (always that K), or 0 (auto over 0..max_tokens).
    DraftPolicy(int fixed, int max_tokens);

    bool adaptive() const { return fixed_ == 0; }
    // The most draft tokens a step may ask for (sizes the verification state rows).
    int max_tokens() const { return max_; }
    // K for every drafting sequence of a step with `decode_rows` decode rows.
    int choose(int64_t decode_rows);
    // Whether the drafter keeps aligning plain decode rows at this batch (see above).
    bool aligned(int64_t decode_rows);
    // One sequence's round: `drafted` drafts, the first `accepted` of them accepted. `evaluated`
    // positions were compared (fewer than drafted when the request ended inside the round).
    void record_round(int evaluated, int accepted);
    // The wall time of a step whose rows were all decode rows with K drafts each.
    void record_step(int64_t decode_rows, int k, double seconds);
    // Estimated acceptance of draft position i (0-based) given the earlier ones accepted.
    double acceptance(int position) const;
    double expected_tokens(int k) const;

private:
    struct Bucket {
        std::vector<double> seconds; // by K: < 0 unmeasured
        std::vector<int> samples;    // by K: steps seen (the first is not counted)
        int64_t steps = 0;
        int64_t probes = 0;
        bool settled_off = false; // plain decoding is the best, for good (see above)
    };
    Bucket& bucket(int64_t decode_rows);
    double floor_seconds(const Bucket& bk, int k) const;
    std::pair<int, double> best_measured(const Bucket& bk) const;
    // The estimates with `optimism` more rounds counted as accepting every position; the
    // choices score with kOptimisticRounds (scored_tokens), so thin early evidence does not end
    // drafting.
    double estimate(int position, double optimism) const;
    double tokens(int k, double optimism) const;
    double scored_tokens(int k) const;

    int fixed_, max_;
    std::vector<int64_t> reached_, accepted_; // by position
    std::map<int, Bucket> buckets_;
    double min_ratio_ = 1e30; // the smallest t(1) / t(0) of any bucket (kNoRatio: none yet)
};

} // namespace ninfer::runtime
