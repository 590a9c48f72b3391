// The seam between whoever restricts a request's tokens (the text layer's JSON and tool-call
// grammars, the server's constraint plans) and the engine that applies the restriction. It sits
// below both: the text layer implements it without depending on the engine (include/ninfer/
// engine.h includes this header for GenerationRequest::constraint).
#pragma once

#include <cstdint>
#include <vector>

namespace ninfer {

// A per-request restriction of the next token (for example a JSON grammar), evaluated on the
// engine thread. Before each token of its request is sampled, allowed() fills `mask` (resized
// by the engine to ModelInfo::token_limit entries, all 0) with 1 for every id that may come
// next; the engine sets the logits of the other ids to -1e30 on a copy (before the penalties,
// which leave them far below every allowed id), so sampling and greedy pick among allowed ids
// only, while the reported logprobs stay those of the raw logits. accept() is then told the id that was chosen (also a stop id). When no id is
// allowed, or either call throws, the request ends with FinishReason::Error. Both calls delay
// the whole step of every request: keep them fast. One object serves one request.
class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    virtual void allowed(std::vector<uint8_t>& mask) = 0;
    virtual void accept(int32_t id) = 0;
};

} // namespace ninfer
