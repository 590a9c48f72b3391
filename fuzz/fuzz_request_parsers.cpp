// Fuzzes the HTTP API's request translators. The first byte picks the endpoint ('C' chat
// completions, 'T' completions, 'A' Anthropic messages, 'N' Anthropic count_tokens, 'R'
// Responses; any other byte by its value mod 5), the rest is the request body, taken as the
// routes take it: parse_body, check_model, the endpoint's parser, then (for chat jobs) the
// messages and tools rendered through the chat template of tests/fixtures_text/tiny_chat.
// A bad request must raise ApiError with a client status (4xx) or ninfer::Error with a client
// category; any other exception (a JSON library type error, std::out_of_range, ...) escapes
// and libFuzzer reports it, as it reports any crash or sanitizer finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ninfer/error.h"
#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/model_context.h"
#include "server/openai_api.h"
#include "server/prepare.h"
#include "server/request_fields.h"
#include "server/responses_api.h"
#include "text/chat_template.h"

using namespace ninfer::server;

namespace {

enum class Endpoint { Chat, Completion, Anthropic, AnthropicCount, Responses };

Endpoint endpoint_of(uint8_t byte) {
    switch (byte) {
    case 'C':
        return Endpoint::Chat;
    case 'T':
        return Endpoint::Completion;
    case 'A':
        return Endpoint::Anthropic;
    case 'N':
        return Endpoint::AnthropicCount;
    case 'R':
        return Endpoint::Responses;
    default:
        return Endpoint(byte % 5);
    }
}

// The served model as the routes see it: a name and the tiny model's chat template.
const ModelContext& model() {
    static const ninfer::text::ChatTemplate chat_template =
        ninfer::text::ChatTemplate::from_model_dir(NINFER_TINY_CHAT_DIR);
    static const ModelContext m = [] {
        ModelContext c;
        c.names = {"tiny-chat"};
        c.chat_template = &chat_template;
        return c;
    }();
    return m;
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_request_parsers: %s\n", what);
        std::abort();
    }
}

void run(Endpoint endpoint, const std::string& text) {
    const ModelContext& m = model();
    const Json body = parse_body(text);
    const ApiStyle style = endpoint == Endpoint::Anthropic || endpoint == Endpoint::AnthropicCount
                               ? ApiStyle::Anthropic
                               : ApiStyle::OpenAI;
    check_model(m, body, style);
    ChatJob job;
    switch (endpoint) {
    case Endpoint::Completion: {
        const CompletionJob c = parse_openai_completion(body);
        check(!c.prompts.empty() || !c.prompt_ids.empty(), "a completion job without prompts");
        return;
    }
    case Endpoint::Chat:
        job = parse_openai_chat(body);
        break;
    case Endpoint::Anthropic:
    case Endpoint::AnthropicCount:
        job = parse_anthropic(body, endpoint == Endpoint::AnthropicCount);
        break;
    case Endpoint::Responses:
        job = parse_responses(body);
        break;
    }
    check(job.messages.is_array() && !job.messages.empty(), "a chat job without messages");
    check(job.gen.n >= 1, "a chat job without choices");
    (void)render_chat(m, job);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        run(endpoint_of(data[0]), text);
    } catch (const ApiError& e) {
        check(e.status() >= 400 && e.status() < 500, "a bad request answered with a 5xx");
    } catch (const ninfer::Error& e) {
        check(e.category() == ninfer::ErrorCategory::InvalidArgument ||
                  e.category() == ninfer::ErrorCategory::Unsupported,
              "a bad request raised a server-side ninfer::Error");
    }
    return 0;
}
