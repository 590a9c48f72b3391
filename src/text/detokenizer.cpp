#include "text/detokenizer.h"

#include "text/unicode.h"

namespace ninfer::text {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamingDetokenizer::push(int32_t id) {
    if (skip_special_ && tokenizer_->is_special(id)) return {};
    pending_ += tokenizer_->token_bytes(id);
    // Emit everything up to the start of a trailing incomplete (but still possibly valid)
    // sequence; invalid bytes before it are repaired by utf8_lossy exactly as decode does.
    size_t keep_from = pending_.size();
    for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
        const unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
        if ((c & 0xC0) == 0x80) continue; // continuation byte: look further back
        if (c >= 0xC0) {
            const size_t start = pending_.size() - back;
            const std::string_view tail = std::string_view(pending_).substr(start);
            // an incomplete prefix of a valid sequence: no valid char and no invalid byte yet
            if (valid_utf8_prefix(tail) == 0 && utf8_lossy(tail) == "\xEF\xBF\xBD" &&
                tail.size() < (c >= 0xF0   ? 4u
                               : c >= 0xE0 ? 3u
                                           : 2u))
                keep_from = start;
        }
        break;
    }
    std::string out = utf8_lossy(std::string_view(pending_).substr(0, keep_from));
    pending_.erase(0, keep_from);
    return out;
}

std::string StreamingDetokenizer::finish() {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
}

} // namespace ninfer::text
