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

bool RequestStream::next(RequestUpdate& update) {
    update = RequestUpdate{};
    if (!state_) return false;
    std::unique_lock lock(state_->mutex);
    state_->ready.wait(lock, [&] { return !state_->pending.empty() || state_->finished; });
    if (state_->finish_read && state_->pending.empty()) return false;
    update.tokens.swap(state_->pending);
    update.seed = state_->seed;
    if (state_->finished) {
        update.finished = true;
        update.reason = state_->reason;
        update.error = state_->error;
        update.timings = state_->timings;
        state_->finish_read = true;
    }
    return true;
}

RequestStream::Wait RequestStream::next_for(RequestUpdate& update,
                                            std::chrono::milliseconds timeout) {
    update = RequestUpdate{};
    if (!state_) return Wait::Done;
    std::unique_lock lock(state_->mutex);
    if (!state_->ready.wait_for(lock, timeout,
                                [&] { return !state_->pending.empty() || state_->finished; }))
        return Wait::Timeout;
    if (state_->finish_read && state_->pending.empty()) return Wait::Done;
    update.tokens.swap(state_->pending);
    update.seed = state_->seed;
    if (state_->finished) {
        update.finished = true;
        update.reason = state_->reason;
        update.error = state_->error;
        update.timings = state_->timings;
        state_->finish_read = true;
    }
    return Wait::Update;
}

void RequestStream::cancel() {
    if (state_) state_->cancel_requested = true;
}

uint64_t RequestStream::id() const {
    return state_ ? state_->id : 0;
}

} // namespace ninfer
