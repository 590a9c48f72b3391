// Fuzzes the JSON constraint. Input: a JSON Schema, a NUL byte, then bytes (without a NUL the
// whole input is bytes and one of a few fixed schemas is used, picked by the first byte).
// Malformed or unsupported schemas must raise ninfer::Error. Otherwise:
//   1. the bytes are fed to the matcher (rejected ones skipped): every state must have a next
//      byte or be complete, every complete text must parse and validate (Grammar::validate), and
//      a greedy completion must reach a complete, valid document;
//   2. the bytes pick tokens among the allowed ones of the tiny tokenizer's masks: each mask
//      must equal the matcher's verdict on every token and never be empty; an output that
//      reaches the end token must parse and validate.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/error.h"
#include "text/json_constraint.h"
#include "text/json_matcher.h"
#include "text/token_trie.h"
#include "text/tokenizer.h"

using ninfer::text::json::Grammar;
using ninfer::text::json::Matcher;

namespace {

const char* const kSchemas[] = {
    "null",
    "{}",
    R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3},
        "b": {"type": "integer", "minimum": -20, "maximum": 300}, "c": {"enum": [1, 12, "x"]},
        "d": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0.5,
        "maximum": 9.25}, "minItems": 1, "maxItems": 3}}, "required": ["a", "c"],
        "additionalProperties": false})",
    R"({"$defs": {"n": {"type": "object", "properties": {"v": {"type": ["integer", "null"]},
        "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "required": ["v"]}},
        "$ref": "#/$defs/n"})",
    R"({"anyOf": [{"type": "object", "properties": {"t": {"const": "p"}, "x": {"type":
        "number"}}, "required": ["t"]}, {"type": "object", "properties": {"t": {"const": "q"}},
        "additionalProperties": {"type": "string", "minLength": 2}}, {"type": "string"}]})",
};

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_json_constraint: %s\n", what);
        std::abort();
    }
}

void check_valid(const Grammar& g, const std::string& text) {
    nlohmann::json v;
    try {
        v = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
        std::fprintf(stderr, "text: %s\n", text.c_str());
        check(false, "a complete text does not parse");
    }
    if (!g.validate(v)) std::fprintf(stderr, "text: %s\n", text.c_str());
    check(g.validate(v), "a complete text does not validate");
}

// The completion the bounded constraint closes with (json::greedy_completion, up to 4000 bytes):
// it must exist from every state and give a valid text.
void complete(Matcher& m, const Grammar& g, std::string text) {
    const std::optional<std::string> close = ninfer::text::json::greedy_completion(m, 4000);
    if (!close) std::fprintf(stderr, "text: %s\n", text.c_str());
    check(close.has_value(), "greedy completion did not finish");
    check(m.advance(*close) && m.can_end(), "the greedy completion does not end the value");
    check_valid(g, text + *close);
}

void bytes_phase(const std::shared_ptr<const Grammar>& g, const uint8_t* data, size_t size) {
    Matcher m(g);
    std::string text;
    for (size_t i = 0; i < size; ++i) {
        if (m.advance(data[i])) text += char(data[i]);
        if (m.can_end()) check_valid(*g, text);
        if (i % 16 == 0) {
            bool any = m.can_end();
            for (int b = 0; b < 256 && !any; ++b) any = m.accepts(std::string(1, char(b)));
            check(any, "a dead state");
        }
    }
    complete(m, *g, text);
}

void token_phase(const nlohmann::json& schema, const ninfer::text::json::Options& o,
                 const std::shared_ptr<const Grammar>& g, const uint8_t* data, size_t size) {
    static const ninfer::text::Tokenizer tok =
        ninfer::text::Tokenizer::from_file(NINFER_TINY_TOKENIZER);
    const int32_t end = tok.token_id("<|im_end|>").value();
    auto c = ninfer::text::make_json_constraint(schema, tok, {end}, o);
    Matcher m(g);
    std::vector<uint8_t> mask;
    std::string text;
    for (size_t i = 0; i < size; ++i) {
        mask.assign(size_t(tok.vocab_size()), 0);
        c->allowed(mask);
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < tok.vocab_size(); ++id) {
            const bool want =
                id == end ? m.can_end() : !tok.is_added(id) && m.accepts(tok.token_bytes(id));
            check(mask[size_t(id)] == want, "the mask differs from the matcher");
            if (want) allowed.push_back(id);
        }
        check(!allowed.empty(), "an empty mask");
        const int32_t id = allowed[data[i] % allowed.size()];
        c->accept(id);
        if (id == end) {
            check_valid(*g, text);
            return;
        }
        check(m.advance(tok.token_bytes(id)), "the matcher rejects an allowed token");
        text += tok.token_bytes(id);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > 4096) return 0;
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
    nlohmann::json schema;
    const uint8_t* bytes = data;
    if (nul) {
        try {
            schema = nlohmann::json::parse(
                std::string(reinterpret_cast<const char*>(data), size_t(nul - data)));
        } catch (const nlohmann::json::exception&) {
            return 0;
        }
        bytes = nul + 1;
    } else {
        schema = nlohmann::json::parse(kSchemas[data[0] % std::size(kSchemas)]);
        bytes = data + 1;
    }
    const size_t n = size_t(data + size - bytes);
    ninfer::text::json::Options o;
    o.max_whitespace = size % 3;
    o.allow_newlines = size % 5 == 0;
    o.max_depth = 5 + int(size % 7);
    std::shared_ptr<const Grammar> g;
    try {
        g = Grammar::compile(schema, o);
    } catch (const ninfer::Error&) {
        return 0;
    }
    bytes_phase(g, bytes, std::min<size_t>(n, 256));
    token_phase(schema, o, g, bytes, std::min<size_t>(n, 24));
    return 0;
}
