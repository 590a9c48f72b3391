// Fuzzes the output parser (reasoning, qwen3_coder tool calls, stop strings): the input is model
// output. Parsing it whole, in pseudo-random chunks and code point by code point must give the
// same reasoning, content and tool calls, the deltas must add up to the totals, and every
// tool call's arguments must be a JSON object.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "text/output_parser.h"
#include "text/unicode.h"

using ninfer::text::OutputParser;
using ninfer::text::ParsedDelta;

namespace {

struct Result {
    std::string reasoning, content;
    std::vector<std::string> args, names;
};

void add(Result& r, const ParsedDelta& d) {
    r.reasoning += d.reasoning;
    r.content += d.content;
    for (const auto& t : d.tool_calls) {
        if (size_t(t.index) >= r.args.size())
            r.args.resize(size_t(t.index) + 1), r.names.resize(size_t(t.index) + 1);
        r.args[size_t(t.index)] += t.arguments;
        if (!t.name.empty()) r.names[size_t(t.index)] = t.name;
    }
}

ninfer::text::ParserOptions options(bool reasoning) {
    ninfer::text::ParserOptions o;
    o.starts_in_reasoning = reasoning;
    o.stop = {"STOP", "<|im_end|>"};
    o.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"},
        "x": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"},
        "s": {"type": "string"}}}}}])");
    return o;
}

Result parse(const std::string& text, bool reasoning, int mode) {
    OutputParser p(options(reasoning));
    Result r;
    if (mode == 0) {
        add(r, p.push(text));
    } else {
        uint32_t seed = uint32_t(text.size()) * 2654435761u + uint32_t(mode);
        size_t i = 0;
        while (i < text.size()) {
            seed = seed * 1103515245u + 12345u;
            size_t n = mode == 1 ? 1 + (seed >> 16) % 7 : 1;
            size_t end = std::min(text.size(), i + n);
            while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
                ++end;
            add(r, p.push(std::string_view(text).substr(i, end - i)));
            i = end;
        }
    }
    add(r, p.finish());
    if (r.reasoning != p.reasoning() || r.content != p.content() ||
        r.args.size() != p.tool_calls().size())
        __builtin_trap();
    for (size_t k = 0; k < r.args.size(); ++k) {
        if (r.args[k] != p.tool_calls()[k].arguments) __builtin_trap();
        const auto j = nlohmann::ordered_json::parse(r.args[k], nullptr, false);
        if (!j.is_object()) __builtin_trap();
    }
    return r;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool reasoning = data[0] & 1;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (ninfer::text::valid_utf8_prefix(text) != text.size()) return 0;
    const Result whole = parse(text, reasoning, 0);
    for (int mode : {1, 2}) {
        const Result part = parse(text, reasoning, mode);
        if (part.reasoning != whole.reasoning || part.content != whole.content ||
            part.args != whole.args || part.names != whole.names)
            __builtin_trap();
    }
    return 0;
}
