// Constrained decoding of JSON: a ninfer::TokenConstraint that lets the model write only JSON
// text valid against a JSON Schema (OpenAI response_format json_object / json_schema, tool
// inputs), then one of the end ids.
//
// Guarantees: every token the mask allows keeps the output a prefix of a valid document that
// can still be completed (within the options' whitespace and depth limits), so a finished
// output parses as JSON and validates against the schema (json_schema.h lists the supported
// keywords, those accepted but not enforced, and those rejected). Once the top-level value is
// complete, only the end ids are allowed (no trailing whitespace); while it is not, they are
// not. Added tokens (special or not) other than the end ids are never allowed.
//
// Length: once told the tokens left (BoundedConstraint), the value is closed along the
// matcher's greedy completion (json_matcher.h) when fewer than that completion's bytes plus a
// margin of 24 tokens remain, so the output ends with an end id within max_tokens (when the
// completion fits at all; a byte is counted as a token).
//
// Cost: the schema is compiled at construction (errors: ninfer::Error InvalidArgument); the
// vocabulary's byte trie is built once per tokenizer and cached (thread-safe, shared). A mask
// walks the trie from the matcher state, pruning rejected prefixes and allowing whole subtrees
// of plain string text at once (bench: test_json_constraint's JsonConstraintBench).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "ninfer/token_constraint.h"
#include "text/json_schema.h"
#include "text/tokenizer.h"

namespace ninfer::text {

using JsonConstraintOptions = json::Options;

// A constraint that can be told how many tokens the output may still use (end id included):
// it then closes its value in time (set before the first allowed()).
class BoundedConstraint : public TokenConstraint {
public:
    virtual void set_tokens_left(int tokens) = 0;
};

// `schema`: a JSON Schema (object or boolean), or null for any JSON object (json_object mode).
// `end_ids`: the ids that may end the output once the value is complete (the model's EOS /
// stop ids; at least one). The tokenizer's data is kept alive by the constraint. The result is
// a BoundedConstraint.
std::shared_ptr<TokenConstraint> make_json_constraint(const nlohmann::json& schema,
                                                      const Tokenizer& tok,
                                                      std::vector<int32_t> end_ids,
                                                      const JsonConstraintOptions& options = {});
std::shared_ptr<TokenConstraint> make_json_constraint(const nlohmann::ordered_json& schema,
                                                      const Tokenizer& tok,
                                                      std::vector<int32_t> end_ids,
                                                      const JsonConstraintOptions& options = {});

// Builds (or finds) the cached vocabulary trie of `tok`, so that the first request does not
// pay for it (about 0.1-0.3 s for a 250k vocabulary).
void warm_json_constraint(const Tokenizer& tok);

} // namespace ninfer::text
