// StepProfile: where an engine step's time goes, for diagnosis (NINFER_STEP_PROFILE=1). Each
// mark() synchronises the device and charges the time since the previous mark to a phase, split
// by step kind (plain decode, verification, other); the engine prints the totals to stderr when
// it is destroyed. Off (the default), mark() costs nothing and never synchronises.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "ops/exec_context.h"

namespace ninfer::runtime {

class StepProfile {
public:
    enum Phase { Schedule, Propose, Forward, Verify, Observe, Commit, kPhases };
    enum Kind { Decode, Verification, Other, kKinds };

    // Enabled iff NINFER_STEP_PROFILE is set to a non-empty value other than 0; 2 also traces
    // every step (one stderr line: its kind, entries, rows, decode rows, K, forward and total
    // time).
    StepProfile();
    bool enabled() const { return enabled_; }
    bool tracing() const { return tracing_; }
    void begin(const ops::ExecContext& ctx);                   // a step starts
    void mark(const ops::ExecContext& ctx, Phase phase);        // phase ended now
    // The step was of this kind; with tracing, its line (entries, all rows of the forward,
    // decode rows, the K the policy chose, the sequences that drafted).
    void end(Kind kind, size_t entries = 0, int64_t rows = 0, int64_t decode_rows = 0,
             int64_t k = 0, int64_t drafting = 0);
    std::string report() const;                                 // "" when off or empty

private:
    using Clock = std::chrono::steady_clock;
    bool enabled_ = false, tracing_ = false;
    Clock::time_point last_;
    std::array<double, kPhases> step_{};                        // this step's seconds
    std::array<std::array<double, kPhases>, kKinds> total_{};   // seconds by kind and phase
    std::array<int64_t, kKinds> steps_{};
    int64_t traced_ = 0;
};

} // namespace ninfer::runtime
