// Fuzzes the Jinja interpreter: the input is a template source, rendered over a fixed Qwen-style
// conversation with tools. Parsing and rendering must succeed or raise ninfer::Error; small
// limits keep every run short.
#include <cstdint>
#include <string>

#include "ninfer/error.h"
#include "text/jinja/template.h"

namespace {

ninfer::text::jinja::Value context() {
    const auto j = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA cat.", "tool_calls": [
          {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [true, null]}}}]},
        {"role": "tool", "content": "{\"ok\": 1.5}"},
        {"role": "user", "content": "Thanks"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<|endoftext|>"})");
    return ninfer::text::jinja::Value::from_json(j);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const ninfer::text::jinja::Value ctx = context();
    ninfer::text::jinja::RenderLimits limits;
    limits.max_steps = 20000;
    limits.max_output = 1 << 20;
    limits.max_call_depth = 50;
    try {
        ninfer::text::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size));
        (void)t.render(ctx, limits);
    } catch (const ninfer::Error&) {
    }
    return 0;
}
