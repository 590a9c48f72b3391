#include "runtime/step_profile.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops/memory.h"

namespace ninfer::runtime {

StepProfile::StepProfile() {
    const char* v = std::getenv("NINFER_STEP_PROFILE");
    enabled_ = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
    tracing_ = enabled_ && std::strcmp(v, "2") == 0;
}

void StepProfile::begin(const ops::ExecContext& ctx) {
    if (!enabled_) return;
    ops::synchronize(ctx);
    step_.fill(0.0);
    last_ = Clock::now();
}

void StepProfile::mark(const ops::ExecContext& ctx, Phase phase) {
    if (!enabled_) return;
    ops::synchronize(ctx);
    const Clock::time_point now = Clock::now();
    step_[phase] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
}

void StepProfile::end(Kind kind, size_t entries, int64_t rows, int64_t decode_rows, int64_t k,
                      int64_t drafting) {
    if (!enabled_) return;
    double sum = 0;
    for (int p = 0; p < kPhases; ++p) {
        total_[kind][p] += step_[p];
        sum += step_[p];
    }
    ++steps_[kind];
    if (tracing_)
        std::fprintf(stderr,
                     "ninfer: step %lld: kind %d, %zu entries, %lld rows, %lld decode rows, "
                     "K %lld, %lld drafting, forward %.3f ms, %.3f ms\n",
                     static_cast<long long>(traced_++), int(kind), entries,
                     static_cast<long long>(rows), static_cast<long long>(decode_rows),
                     static_cast<long long>(k), static_cast<long long>(drafting),
                     1e3 * step_[Forward], 1e3 * sum);
}

std::string StepProfile::report() const {
    if (!enabled_) return "";
    static const char* kPhaseNames[kPhases] = {"schedule", "propose", "forward",
                                               "verify",   "observe", "commit"};
    static const char* kKindNames[kKinds] = {"decode", "verification", "other"};
    std::string out;
    char line[256];
    for (int k = 0; k < kKinds; ++k) {
        if (steps_[k] == 0) continue;
        double sum = 0;
        for (double s : total_[k]) sum += s;
        std::snprintf(line, sizeof line, "ninfer: step profile, %s steps: %lld, %.3f ms/step:",
                      kKindNames[k], static_cast<long long>(steps_[k]),
                      1e3 * sum / double(steps_[k]));
        out += line;
        for (int p = 0; p < kPhases; ++p) {
            std::snprintf(line, sizeof line, " %s %.3f", kPhaseNames[p],
                          1e3 * total_[k][p] / double(steps_[k]));
            out += line;
        }
        out += " (ms)\n";
    }
    return out;
}

} // namespace ninfer::runtime
