#include "runtime/speculative/draft_policy.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace ninfer::runtime {
namespace {

// The prior acceptance: what published MTP heads reach at the first positions, worth this many
// rounds, so that the first measured rounds move it quickly and random weights (no acceptance)
// turn speculation off after a handful of rounds.
constexpr double kPriorAcceptance = 0.7;
constexpr double kPriorRounds = 4;
// Optimism while the evidence is thin: the decisions score each K with every position's
// acceptance as if this many more rounds had accepted it. It fades as rounds come in (4 in 4
// rounds, 4 in 100), so a few early rejections (the first tokens of an answer are the hardest
// to draft) do not end drafting, and acceptance near 0 turns it off after a few dozen rounds.
constexpr double kOptimisticRounds = 4;
// Weight of a new step time in its running average.
constexpr double kTimeWeight = 0.3;
// min_ratio_ before any bucket measured t(1) / t(0).
constexpr double kNoRatio = 1e30;
// Steps of a bucket between re-measurements of another K.
constexpr int64_t kReexploreSteps = 32;
// Plain decoding settles (the alignment stops, and with it drafting for the sequences running)
// only on this many rounds' evidence at draft position 1, or when no acceptance could make a
// draft pay (t(1) >= 2 t(0)): fewer rounds may be an answer's first tokens, the hardest to draft
// (the demo model's prose on an H100 rejected its first two drafts, then accepted 19 in 20).
constexpr int64_t kSettleRounds = 16;
// Until then, with plain decoding the best, K = 1 is measured again every this many steps: each
// such round is more evidence.
constexpr int64_t kUnsettledReexploreSteps = 8;

} // namespace

DraftPolicy::DraftPolicy(int fixed, int max_tokens) : fixed_(fixed), max_(max_tokens) {
    require(fixed >= 0 && max_tokens >= 1 && fixed <= max_tokens,
            "DraftPolicy: draft tokens must be in [0, ", max_tokens, "]");
    if (fixed > 0) max_ = fixed;
    reached_.assign(size_t(max_), 0);
    accepted_.assign(size_t(max_), 0);
}

// Position i's acceptance with `optimism` more rounds counted as accepting it.
double DraftPolicy::estimate(int i, double optimism) const {
    if (i < 0 || i >= max_) return 0;
    return (double(accepted_[size_t(i)]) + kPriorAcceptance * kPriorRounds + optimism) /
           (double(reached_[size_t(i)]) + kPriorRounds + optimism);
}

double DraftPolicy::tokens(int k, double optimism) const {
    double sum = 1, run = 1;
    for (int i = 0; i < k; ++i) sum += run *= estimate(i, optimism);
    return sum;
}

double DraftPolicy::acceptance(int i) const { return estimate(i, 0); }
double DraftPolicy::expected_tokens(int k) const { return tokens(k, 0); }

void DraftPolicy::record_round(int evaluated, int accepted) {
    evaluated = std::min(evaluated, max_);
    for (int i = 0; i < evaluated; ++i) {
        ++reached_[size_t(i)];
        if (i < accepted) ++accepted_[size_t(i)];
        else break; // later positions were not reached
    }
}

DraftPolicy::Bucket& DraftPolicy::bucket(int64_t decode_rows) {
    const int b = int(std::bit_width(uint64_t(std::max<int64_t>(decode_rows, 1))));
    Bucket& bk = buckets_[b];
    if (bk.seconds.empty()) {
        bk.seconds.assign(size_t(max_) + 1, -1.0);
        bk.samples.assign(size_t(max_) + 1, 0);
    }
    return bk;
}

void DraftPolicy::record_step(int64_t decode_rows, int k, double seconds) {
    if (fixed_ > 0 || k < 0 || k > max_ || seconds <= 0) return;
    Bucket& bk = bucket(decode_rows);
    if (bk.samples[size_t(k)]++ == 0) return; // warm-up: kernels, graph capture
    double& t = bk.seconds[size_t(k)];
    t = t < 0 ? seconds : (1 - kTimeWeight) * t + kTimeWeight * seconds;
    if (bk.seconds[0] > 0 && bk.seconds[1] > 0)
        min_ratio_ = std::min(min_ratio_, bk.seconds[1] / bk.seconds[0]);
}

bool DraftPolicy::aligned(int64_t decode_rows) {
    return fixed_ > 0 || !bucket(decode_rows).settled_off;
}

// A floor of a K-draft step's time in this bucket, before it is measured: drafting never makes a
// step faster, and each further draft costs at least the last measured draft's increment (from
// the deepest measured K below, j >= 2: t(j) + (t(j) - t(j - 1)) (K - j)). The first draft
// carries the fixed costs of drafting (the draft head, the alignment), so its increment says
// nothing of later drafts: from j = 1 the floor is t(1) (on the demo model on an H100 the first
// draft costs 0.6-0.75 plain steps, each later one about 0.12). For K = 1 itself: t(0) times the
// smallest ratio t(1) / t(0) another bucket measured.
double DraftPolicy::floor_seconds(const Bucket& bk, int k) const {
    const double t0 = bk.seconds[0];
    int j = k - 1;
    while (j >= 1 && bk.seconds[size_t(j)] < 0) --j;
    if (j == 1) return std::max(t0, bk.seconds[1]);
    if (j >= 2 && bk.seconds[size_t(j - 1)] > 0) {
        const double tj = bk.seconds[size_t(j)], step = tj - bk.seconds[size_t(j - 1)];
        return std::max(t0, tj + std::max(0.0, step) * (k - j));
    }
    return t0 * (min_ratio_ < kNoRatio ? std::max(1.0, min_ratio_) : 1.0);
}

// The committed tokens a K-draft round is scored with: optimistic while the evidence is thin.
double DraftPolicy::scored_tokens(int k) const { return tokens(k, kOptimisticRounds); }

// The K this bucket's measurements favour, and its score (committed tokens per second).
std::pair<int, double> DraftPolicy::best_measured(const Bucket& bk) const {
    int best = 0;
    double best_score = 1.0 / bk.seconds[0];
    for (int k = 1; k <= max_; ++k)
        if (bk.seconds[size_t(k)] > 0 && scored_tokens(k) / bk.seconds[size_t(k)] > best_score) {
            best = k;
            best_score = scored_tokens(k) / bk.seconds[size_t(k)];
        }
    return {best, best_score};
}

int DraftPolicy::choose(int64_t decode_rows) {
    if (fixed_ > 0) return fixed_;
    Bucket& bk = bucket(decode_rows);
    ++bk.steps;
    if (bk.seconds[0] < 0) return 0; // the plain step's time first: every bound uses it
    const auto [best, best_score] = best_measured(bk);
    // Climb: only the best's untried neighbours are tried, deeper first, and only while their
    // bound could still beat the best. Every first step of a K pays its warm-up (kernels, graph
    // captures), so a short request must not sweep the whole range; the committed-tokens rate is
    // unimodal in K (tokens(K) grows ever more slowly, the step time about linearly).
    bk.settled_off = false;
    for (const int k : {best + 1, best - 1})
        if (k >= 1 && k <= max_ && bk.seconds[size_t(k)] < 0 &&
            scored_tokens(k) / floor_seconds(bk, k) > best_score)
            return k;
    // No acceptance makes K = 1 pay when its step costs two plain ones (measured, or its floor).
    const bool hopeless = std::max(bk.seconds[1], floor_seconds(bk, 1)) >= 2 * bk.seconds[0];
    bk.settled_off = best == 0 && (hopeless || reached_[0] >= kSettleRounds);
    if (best == 0 && !bk.settled_off && bk.steps % kUnsettledReexploreSteps == 0) return 1;
    if (bk.steps % kReexploreSteps == 0) { // plain decoding, and the best's neighbours
        const int64_t n = bk.probes++;
        const int probe =
            best > 0 && n % 2 == 0 ? 0 : std::clamp(best + (n % 4 < 2 ? 1 : -1), 0, max_);
        if (probe != best) return probe;
    }
    return best;
}

} // namespace ninfer::runtime
