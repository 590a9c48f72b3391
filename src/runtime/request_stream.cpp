#include "runtime/sequence.h"

namespace ninfer {

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
    case FinishReason::None:
        return "none";
    case FinishReason::Stop:
        return "stop";
    case FinishReason::Length:
        return "length";
    case FinishReason::Cancelled:
        return "cancelled";
    case FinishReason::Error:
        return "error";
    }
    return "unknown";
}

namespace {

bool has_news(const RequestStream::State& s) {
    return !s.pending.empty() || !s.pending_prompt.empty() || s.finished;
}

// Moves what is new into `update` (the state's mutex held); false when a finished request had
// already been read to the end.
bool take(RequestStream::State& s, RequestUpdate& update) {
    if (s.finish_read && s.pending.empty() && s.pending_prompt.empty()) return false;
    update.tokens.swap(s.pending);
    update.prompt_logprobs.swap(s.pending_prompt);
    update.seed = s.seed;
    if (s.finished) {
        update.finished = true;
        update.reason = s.reason;
        update.error = s.error;
        update.timings = s.timings;
        s.finish_read = true;
    }
    return true;
}

} // namespace

bool RequestStream::next(RequestUpdate& update) {
    update = RequestUpdate{};
    if (!state_) return false;
    std::unique_lock lock(state_->mutex);
    state_->ready.wait(lock, [&] { return has_news(*state_); });
    return take(*state_, update);
}

RequestStream::Wait RequestStream::next_for(RequestUpdate& update,
                                            std::chrono::milliseconds timeout) {
    update = RequestUpdate{};
    if (!state_) return Wait::Done;
    std::unique_lock lock(state_->mutex);
    if (!state_->ready.wait_for(lock, timeout, [&] { return has_news(*state_); }))
        return Wait::Timeout;
    return take(*state_, update) ? Wait::Update : Wait::Done;
}

void RequestStream::cancel() {
    if (state_) state_->cancel_requested = true;
}

uint64_t RequestStream::id() const {
    return state_ ? state_->id : 0;
}

} // namespace ninfer
