// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that splits text the way the HF
// `Split` pre-tokenizer does with behaviour "Isolated": every match and every gap between
// matches becomes one piece, in order.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::text {

class RegexSplitter {
public:
    // Compiles `pattern` (Oniguruma/PCRE syntax as in tokenizer.json); a pattern PCRE2 rejects
    // raises ninfer::Error (InvalidArgument) with PCRE2's message and offset.
    explicit RegexSplitter(const std::string& pattern);
    ~RegexSplitter();
    RegexSplitter(const RegexSplitter&) = delete;
    RegexSplitter& operator=(const RegexSplitter&) = delete;

    // Calls piece(begin, end) for each piece of valid UTF-8 `text`, in order. Thread-safe.
    template <typename F> void split(std::string_view text, F&& piece) const {
        std::vector<std::pair<size_t, size_t>> spans;
        split_spans(text, spans);
        for (auto [b, e] : spans) piece(b, e);
    }
    void split_spans(std::string_view text, std::vector<std::pair<size_t, size_t>>& spans) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::text
