// Token constraints the server composes for one choice (ninfer::TokenConstraint):
//   1. reasoning: while the output is inside <think>, any token (stop ids too, unless a forced
//      part follows); with a budget, after `budget` tokens the close "\n</think>\n\n" is forced;
//   2. forced text: the output must spell one of the literals, byte for byte;
//   3. the rest: free, or an inner constraint (a JSON schema grammar for response_format), or
//      the whole tool-call constraint (text/tool_call_constraint.h: tool_choice required/named),
//      made when the reasoning ends with the text still to force before it ("\n\n" after the
//      model's own </think>) and the tokens left of max_tokens.
// Matching works on token bytes, so a literal may be spelled by any tokenisation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/engine.h"
#include "text/tokenizer.h"

namespace ninfer::server {

struct ConstraintPlan {
    bool starts_in_reasoning = false;
    int reasoning_budget = -1;             // tokens of reasoning before </think> is forced
                                           // (-1: unlimited; 0: at once)
    int max_tokens = 0;                    // the request's max_new_tokens (for tool_tail)
    std::vector<std::string> literals;     // forced text after the reasoning (one of them)
    std::vector<int32_t> stop_ids;         // banned while reasoning when something is forced
    std::shared_ptr<TokenConstraint> tail; // after the literals (null: free)
    // Instead of literals and tail: the constraint of everything after the reasoning, given
    // the text to force first and the tokens left.
    std::function<std::shared_ptr<TokenConstraint>(const std::string& lead, int tokens_left)>
        tool_tail;
    bool active() const {
        return (starts_in_reasoning && reasoning_budget >= 0) || !literals.empty() || tail ||
               tool_tail;
    }
};

// `tokenizer` must outlive the constraint.
std::shared_ptr<TokenConstraint> make_plan_constraint(const text::Tokenizer& tokenizer,
                                                      ConstraintPlan plan);

} // namespace ninfer::server
