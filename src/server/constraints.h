// Token constraints the server composes for one choice (ninfer::TokenConstraint):
//   1. reasoning: while the output is inside <think>, any token (stop ids too, unless a forced
//      part follows); with a budget, after `budget` tokens the close "\n</think>\n\n" is forced;
//   2. forced text: the output must spell one of the literals, byte for byte (a forced tool call
//      "<tool_call>\n<function=NAME>\n" for tool_choice required/named);
//   3. the rest: free, or an inner constraint (a JSON schema grammar for response_format).
// Matching works on token bytes, so a literal may be spelled by any tokenisation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/engine.h"
#include "text/tokenizer.h"

namespace ninfer::server {

struct ConstraintPlan {
    bool starts_in_reasoning = false;
    int reasoning_budget = 0;              // 0: unlimited
    std::vector<std::string> literals;     // forced text after the reasoning (one of them)
    std::vector<int32_t> stop_ids;         // banned while reasoning when something is forced
    std::shared_ptr<TokenConstraint> tail; // after the literals (null: free)
    bool active() const { return reasoning_budget > 0 || !literals.empty() || tail; }
};

// `tokenizer` must outlive the constraint.
std::shared_ptr<TokenConstraint> make_plan_constraint(const text::Tokenizer& tokenizer,
                                                      ConstraintPlan plan);

} // namespace ninfer::server
