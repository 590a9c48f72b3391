// Tokenizer and streaming detokenizer on the tiny byte-level tokenizer of tests/fixtures_text
// and on hand-made tokenizer.json files (merge order, ties, added-token options, errors). The
// real Qwen3.5/3.6 tokenizer is checked against HF tokenizers by check_tokenizer_oracle.py.
#include <gtest/gtest.h>

#include "ninfer/error.h"
#include "text/byte_level.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

using ninfer::text::Tokenizer;

namespace {

const Tokenizer& tiny() {
    static const Tokenizer t =
        Tokenizer::from_model_dir(std::string(NINFER_TEXT_FIXTURES) + "/tiny_chat");
    return t;
}

// A byte-level BPE over the letters a, b, c with the given merges and added tokens.
Tokenizer handmade(const std::string& merges, const std::string& added = "[]",
                   bool ignore_merges = false) {
    std::string vocab = "{";
    for (int b = 0; b < 256; ++b) {
        const std::string key = ninfer::text::byte_level_encode(std::string(1, char(b)));
        vocab += (b ? "," : "") + std::string("\"") +
                 (key == "\""   ? "\\\""
                  : key == "\\" ? "\\\\"
                                : key) +
                 "\":" + std::to_string(b);
    }
    vocab += R"(,"aa":256,"ab":257,"aaa":258,"bc":259,"abc":260,"aab":261})";
    return Tokenizer::from_json(R"({"model": {"type": "BPE", "ignore_merges": )" +
                                    std::string(ignore_merges ? "true" : "false") +
                                    R"(, "vocab": )" + vocab + R"(, "merges": )" + merges +
                                    R"(}, "pre_tokenizer": {"type": "ByteLevel", "use_regex": true},
                                    "added_tokens": )" +
                                    added + "}",
                                "");
}

} // namespace

TEST(Tokenizer, TinyIdsMatchHfTokenizers) {
    // ids from HF tokenizers 0.23.3 on tests/fixtures_text/tiny_chat/tokenizer.json
    EXPECT_EQ(tiny().encode("the quick brown fox <think>hi</think>"),
              (std::vector<int32_t>{116, 257, 32, 113, 117, 105, 99, 107, 32, 98, 114, 111, 119,
                                    110, 265, 32, 299, 275, 300}));
}

TEST(Tokenizer, RoundTripsTextAndNormalisesToNfc) {
    for (const std::string s :
         {"", " ", "Hello, world!\n\n  x", "東京 👨‍👩‍👧 مرحبا",
          "tab\tand\r\nCRLF", "<|im_start|>user\nhi<|im_end|>", "12345678901234567890"})
        EXPECT_EQ(tiny().decode(tiny().encode(s)), s);
    EXPECT_EQ(tiny().decode(tiny().encode("e\xCC\x81")), "\xC3\xA9"); // e + U+0301 -> é
}

TEST(Tokenizer, SpecialTokensAreMatchedBeforeBpe) {
    const auto im_start = *tiny().token_id("<|im_start|>");
    const auto think = *tiny().token_id("<think>");
    EXPECT_EQ(tiny().encode("<|im_start|>"), std::vector<int32_t>{im_start});
    EXPECT_EQ(tiny().encode("x<|im_start|><think>"), (std::vector<int32_t>{120, im_start, think}));
    // parse_special = false: special tokens become text, non-special ones (<think>) still match
    const auto ids = tiny().encode("<|im_start|><think>", false);
    EXPECT_GT(ids.size(), 2u);
    EXPECT_EQ(ids.back(), think);
    EXPECT_TRUE(tiny().is_special(im_start));
    EXPECT_FALSE(tiny().is_special(think));
}

TEST(Tokenizer, DecodeSkipsOnlySpecialTokens) {
    const auto ids = tiny().encode("<|im_start|>a<think>b</think><|im_end|>");
    EXPECT_EQ(tiny().decode(ids, true), "a<think>b</think>");
    EXPECT_EQ(tiny().decode(ids, false), "<|im_start|>a<think>b</think><|im_end|>");
}

TEST(Tokenizer, InvalidUtf8IsAClearError) {
    try {
        tiny().encode("ok \xFF bad");
        FAIL();
    } catch (const ninfer::Error& e) {
        EXPECT_EQ(e.category(), ninfer::ErrorCategory::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 3"), std::string::npos);
    }
    for (const char* bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xBD"})
        EXPECT_THROW(tiny().encode(bad), ninfer::Error) << bad;
    EXPECT_THROW(tiny().decode(std::vector<int32_t>{1, 100000}), ninfer::Error);
}

TEST(Tokenizer, MergesApplyByRankLeftmostFirst) {
    const Tokenizer t = handmade(R"([["a","a"],["a","b"],["aa","a"],["b","c"]])");
    EXPECT_EQ(t.encode("aaa"), (std::vector<int32_t>{258}));       // aa then aa+a
    EXPECT_EQ(t.encode("aaaa"), (std::vector<int32_t>{256, 256})); // leftmost pairs first
    EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{257, 99}));   // ab outranks bc
    const Tokenizer u = handmade(R"([["b","c"],["a","b"]])");
    EXPECT_EQ(u.encode("abc"), (std::vector<int32_t>{97, 259}));
    // ignore_merges: a piece that is a token is that token
    const Tokenizer v = handmade(R"([["a","a"]])", "[]", true);
    EXPECT_EQ(v.encode("abc"), (std::vector<int32_t>{260}));
}

TEST(Tokenizer, AddedTokenStripOptions) {
    const Tokenizer t = handmade("[]", R"([{"id": 300, "content": "<x>", "special": true,
        "lstrip": true, "rstrip": true}])");
    EXPECT_EQ(t.encode("a  <x>  b"), (std::vector<int32_t>{97, 300, 98}));
    EXPECT_EQ(t.vocab_size(), 301);
}

TEST(Tokenizer, MalformedFilesAreClearErrors) {
    EXPECT_THROW(Tokenizer::from_json("{", ""), ninfer::Error);
    EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "Unigram"}})", ""), ninfer::Error);
    EXPECT_THROW(Tokenizer::from_json(
                     R"({"model": {"type": "BPE", "vocab": {}, "merges": [["a","b"]]}})", ""),
                 ninfer::Error);
    EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})",
                                      ""),
                 ninfer::Error);
    EXPECT_THROW(Tokenizer::from_model_dir("/nonexistent"), ninfer::Error);
    // token ids that are not integers in range (fuzz_tokenizer finding: 1e117 parses as a float,
    // whose conversion to int was undefined behaviour under UBSan)
    for (const char* id : {"1100000000000000000000000000000000000000000000000000", "2.5", "-1",
                           "18446744073709551615", "\"7\""})
        EXPECT_THROW(Tokenizer::from_json(std::string(R"({"model": {"type": "BPE", "vocab": {"a": )") +
                                              id + R"(}, "merges": []}})",
                                          ""),
                     ninfer::Error)
            << id;
    EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
        "added_tokens": [{"id": 1e300, "content": "<x>"}]})",
                                      ""),
                 ninfer::Error);
    EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
                                      R"({"added_tokens_decoder": {"abc": {"content": "<x>"}}})"),
                 ninfer::Error);
}

TEST(StreamingDetokenizer, NeverEmitsBrokenUtf8AndMatchesDecode) {
    // byte tokens (id = byte in the tiny vocabulary) that split multi-byte characters
    const std::string text = "a\xC3\xA9\xE6\x9D\xB1\xF0\x9F\x91\x8D!";
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(int32_t(c));
    ninfer::text::StreamingDetokenizer d(tiny(), false);
    std::string out;
    for (int32_t id : ids) {
        const std::string piece = d.push(id);
        EXPECT_EQ(ninfer::text::valid_utf8_prefix(piece), piece.size());
        out += piece;
    }
    out += d.finish();
    EXPECT_EQ(out, text);
    // invalid sequences become U+FFFD exactly where decode puts them
    for (const std::vector<int32_t>& bad : std::vector<std::vector<int32_t>>{{0xE6, 0x41},
                                                                             {0xC3},
                                                                             {0xF0, 0x9F, 0x91},
                                                                             {0x80, 0xBF, 0x41},
                                                                             {0xE0, 0x80, 0x41},
                                                                             {0xED, 0xA0, 0x80}}) {
        ninfer::text::StreamingDetokenizer s(tiny(), false);
        std::string got;
        for (int32_t id : bad) got += s.push(id);
        got += s.finish();
        EXPECT_EQ(got, tiny().decode(bad));
    }
}

TEST(StreamingDetokenizer, SkipsSpecialTokens) {
    ninfer::text::StreamingDetokenizer d(tiny(), true);
    std::string out;
    for (int32_t id : tiny().encode("<|im_start|>hi<think>x</think><|im_end|>")) out += d.push(id);
    EXPECT_EQ(out + d.finish(), "hi<think>x</think>");
}
