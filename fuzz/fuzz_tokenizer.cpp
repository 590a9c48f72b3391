// Fuzzes the tokenizer. Input starting with 'J': the rest is tokenizer.json text (loading must
// succeed or raise ninfer::Error). Otherwise the input is text for the tiny tokenizer and, when
// NINFER_FUZZ_TOKENIZER names one, a real tokenizer.json: invalid UTF-8 must raise Error; valid
// text must round-trip (decode(encode(x)) == NFC(x)) and stream-decode to the same text.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ninfer/error.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

using ninfer::text::Tokenizer;

namespace {

std::vector<std::unique_ptr<Tokenizer>> load_all() {
    std::vector<std::unique_ptr<Tokenizer>> out;
    out.push_back(std::make_unique<Tokenizer>(Tokenizer::from_file(NINFER_TINY_TOKENIZER)));
    if (const char* real = std::getenv("NINFER_FUZZ_TOKENIZER"))
        out.push_back(std::make_unique<Tokenizer>(Tokenizer::from_file(real)));
    return out;
}

void check(const Tokenizer& tok, const std::string& text) {
    std::vector<int32_t> ids;
    try {
        ids = tok.encode(text);
    } catch (const ninfer::Error&) {
        if (ninfer::text::valid_utf8_prefix(text) == text.size()) __builtin_trap();
        return;
    }
    if (ninfer::text::valid_utf8_prefix(text) != text.size()) __builtin_trap();
    const std::string decoded = tok.decode(ids);
    if (decoded != ninfer::text::nfc(text)) __builtin_trap();
    ninfer::text::StreamingDetokenizer stream(tok, false);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    if (streamed != decoded) __builtin_trap();
    // bytes of arbitrary ids stream exactly as decode repairs them
    ninfer::text::StreamingDetokenizer raw(tok, true);
    std::string a;
    std::vector<int32_t> picked;
    for (unsigned char c : text) picked.push_back(int32_t(c) % tok.vocab_size());
    for (int32_t id : picked) {
        try {
            a += raw.push(id);
        } catch (const ninfer::Error&) {
            return; // a hole in the vocabulary
        }
    }
    a += raw.finish();
    if (a != tok.decode(picked, true)) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const auto tokenizers = load_all();
    const std::string input(reinterpret_cast<const char*>(data), size);
    if (!input.empty() && input[0] == 'J') {
        try {
            Tokenizer t = Tokenizer::from_json(input.substr(1), "", "fuzz");
            (void)t.encode("hello <think> world 123");
        } catch (const ninfer::Error&) {
        }
        return 0;
    }
    for (const auto& t : tokenizers) check(*t, input);
    return 0;
}
