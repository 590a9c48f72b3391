#include "text/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace ninfer::text {

struct RegexSplitter::Impl {
    pcre2_code* code = nullptr;
    bool jit = false;
};

RegexSplitter::RegexSplitter(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
    if (!impl_->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail_invalid("tokenizer regex: ", reinterpret_cast<const char*>(msg), " at offset ", offset,
                     " in '", pattern, "'");
    }
    impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() {
    pcre2_code_free(impl_->code);
}

void RegexSplitter::split_spans(std::string_view text,
                                std::vector<std::pair<size_t, size_t>>& spans) const {
    spans.clear();
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
    if (!md) fail(ErrorCategory::OutOfMemory, "tokenizer regex: no match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0, last = 0;
    while (pos < text.size()) {
        const int rc = impl_->jit
                           ? pcre2_jit_match(impl_->code, subject, text.size(), pos, 0, md, nullptr)
                           : pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                         md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(md);
            fail_invalid("tokenizer regex: match error ", rc);
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t b = ov[0], e = ov[1];
        if (e == b) { // an empty match: step over one code point
            pos = b + 1;
            while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80)
                ++pos;
            continue;
        }
        if (b > last) spans.emplace_back(last, b);
        spans.emplace_back(b, e);
        last = pos = e;
    }
    if (last < text.size()) spans.emplace_back(last, text.size());
    pcre2_match_data_free(md);
}

} // namespace ninfer::text
