// Constrained decoding of whole qwen3_coder tool calls (tool_choice required / named): a
// ninfer::TokenConstraint that lets the model write only
//
//   LEAD<tool_call>\n<function=NAME>\n
//   <parameter=P>\nVALUE\n</parameter>\n      (each declared parameter at most once, any order)
//   </function>\n</tool_call>
//   [\n<tool_call>... more calls, with `parallel`]  then one of the end ids
//
// NAME is one of the tools given; every required parameter comes before </function>; no
// parameter the schema does not declare is written (whatever additionalProperties says: extra
// keys are never needed for validity). VALUE is typed as the output parser types it
// (tool_call_format.h, parser_type): string-typed (and untyped) parameters are raw text (no
// "null", no tool-call tags inside, minLength/maxLength in code points, enum/const as their
// texts); every other type is JSON text valid against the parameter's schema (the JSON grammar,
// json_schema.h, with the parameters' $defs/definitions). So the arguments the parser returns
// always validate against the tool's parameters schema.
//
// Length: with max_tokens > 0 (the tokens left for the whole tool-call output, end id included),
// a token is allowed only if the output can still be completed within the tokens left (the
// cheapest completion is counted in tokens for fixed text, one token a byte for JSON closings;
// JSON values are closed along a greedy closing once fewer than a margin of tokens remain), so
// a forced call ends with its end id instead of being cut by max_tokens. When even the shortest
// call does not fit, the length is not enforced.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ninfer/token_constraint.h"
#include "text/tokenizer.h"

namespace ninfer::text {

struct ToolCallConstraintOptions {
    bool parallel = true; // after a call, another call may follow (else only an end id)
    std::string lead;     // text forced before the first <tool_call> (e.g. "\n\n" after </think>)
    int max_tokens = 0;   // tokens the output may still use, end id included (0: unbounded)
};

// `tools`: OpenAI tools ({"type": "function", "function": {"name", "parameters"}}), the ones
// that may be called (at least one). Raises ninfer::Error InvalidArgument for schemas the JSON
// grammar rejects, tool or parameter names that cannot be written in the format (containing
// '>' or a newline), more than 64 parameters in a tool.
std::shared_ptr<TokenConstraint> make_tool_call_constraint(const nlohmann::ordered_json& tools,
                                                           const Tokenizer& tok,
                                                           std::vector<int32_t> end_ids,
                                                           const ToolCallConstraintOptions& opt);

// The fewest tokens a call of `tools` takes (lead and end id included): what a reasoning budget
// must leave of max_tokens for the call to be complete.
int min_tool_call_tokens(const nlohmann::ordered_json& tools, const Tokenizer& tok,
                         std::vector<int32_t> end_ids, const ToolCallConstraintOptions& opt);

} // namespace ninfer::text
