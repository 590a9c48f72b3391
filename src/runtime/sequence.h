// Engine-side state of one request, and the stream state it shares with the reader.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ninfer/engine.h"
#include "runtime/media.h"

namespace ninfer {

using Clock = std::chrono::steady_clock;

// Shared between the engine thread (writer) and the RequestStream holder (reader).
struct RequestStream::State {
    uint64_t id = 0;
    std::atomic<bool> cancel_requested{false};
    std::mutex mutex;
    std::condition_variable ready;
    std::vector<GeneratedToken> pending;      // produced, not yet read
    std::vector<TokenLogprob> pending_prompt; // prompt scores, not yet read
    bool finished = false;
    bool finish_read = false;
    FinishReason reason = FinishReason::None;
    std::string error;
    uint64_t seed = 0;
    RequestTimings timings;
};

namespace runtime {

struct Sequence {
    std::shared_ptr<RequestStream::State> stream;
    GenerationRequest request;
    uint64_t seed = 0;
    std::vector<int32_t> tokens; // prompt, then generated tokens
    int64_t cached = 0;          // leading tokens already in the KV cache and GDN state
    int32_t slot = -1;           // GDN state slot (-1: not resident)
    std::vector<int32_t> blocks; // KV blocks covering at least tokens[0, cached), grown per step
    int64_t generated = 0;
    uint64_t arrival = 0;        // submission order (ties of priority run in this order)
    int64_t step_rows = 0;       // rows scheduled in the current step (scheduler only)
    // Speculative decoding. drafts: this step's draft tokens after the anchor (sized by the
    // scheduler, filled by the drafter; empty when the step does not speculate). draft_ready:
    // the drafter's context reaches the last committed token, so the next step may speculate.
    std::vector<int32_t> drafts;
    bool draft_ready = false;
    bool drafter_off = false; // the drafter stopped aligning it: it never drafts again
    int32_t draft_row = -1; // drafter-private: its output row for this sequence
    // Drafts proposed from a sparse distribution (DFlash2's sampled walk): draft i's q over
    // draft_q_ids[i k, (i + 1) k) with k = draft_q_k, set by the drafter with the drafts.
    // draft_q_k 0: one-hot drafts (the verifier needs no q).
    std::vector<int32_t> draft_q_ids;
    std::vector<float> draft_q;
    int draft_q_k = 0;
    SpeculativeStats spec;
    int64_t cached_tokens = 0;   // prompt tokens served by the prefix cache at first admission
    int64_t prompt_scored = 0;   // prompt positions whose scores were reported (a recomputed
                                 // prefix after preemption is not reported again)
    int preemptions = 0;
    bool admitted_once = false;
    bool done = false; // finished: the scheduler drops it
    // A waiting prefill_only request that an admitted prompt extends: that prompt computes the
    // same tokens now, so the engine ends this one (Cancelled) instead of computing them again.
    bool superseded = false;
    std::unordered_set<int32_t> stop_ids;
    std::unordered_set<int32_t> prompt_set;             // for repetition penalties
    std::unordered_map<int32_t, int32_t> output_counts; // for penalties
    std::vector<uint8_t> allowed;                       // request.constraint's mask of this step
    Clock::time_point submitted, scheduled, first_token;
    bool has_scheduled = false, has_first_token = false;
    // Multimodal prompts: the media layout (null: text), and the tokens as the prefix cache keys
    // them (placeholders replaced by per-medium ids; empty for text prompts: tokens itself).
    std::unique_ptr<SequenceMedia> media;
    std::vector<int32_t> key_tokens;

    const std::vector<int32_t>& cache_tokens() const {
        return key_tokens.empty() ? tokens : key_tokens;
    }
    void append_token(int32_t id) {
        tokens.push_back(id);
        if (!key_tokens.empty()) key_tokens.push_back(id);
    }

    int64_t prompt_length() const { return int64_t(request.prompt.size()); }
    // Rows this sequence wants in the next step: the uncached tail of its tokens.
    int64_t pending_rows() const { return int64_t(tokens.size()) - cached; }
};

} // namespace runtime
} // namespace ninfer
