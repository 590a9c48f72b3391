// Request fields beyond the core OpenAI sampling set, shared by chat and completions: OpenAI's
// logit_bias and vLLM's extensions (min_tokens, allowed_token_ids, truncate_prompt_tokens), and
// vLLM's constraint fields for chat (guided_json, guided_choice, structured_outputs). Each bad
// value is a 400 naming its field; whether ids are tokens of the model is checked when the
// request is prepared (prepare.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "server/chat_job.h"
#include "server/request_fields.h"

namespace ninfer::server {

// logit_bias, min_tokens, allowed_token_ids and truncate_prompt_tokens of a request body.
void parse_sampling_extras(const Json& b, GenOptions& g);

// guided_json / guided_choice / structured_outputs {json, choice} into job.format (a 400 when
// response_format or another of them is given too, or for the kinds not built: regex, grammar).
void parse_vllm_constraints(const Json& b, ChatJob& job);

// b[name] as token ids (absent or null: none; non_empty: an empty list is a 400 too).
std::vector<int32_t> token_id_list(const Json& b, const char* name, bool non_empty);

} // namespace ninfer::server
