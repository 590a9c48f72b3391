#include "text/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace ninfer::text {

void Tokenizer::Impl::index_added() {
    std::sort(added.begin(), added.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
    for (auto& v : added_by_first_byte) v.clear();
    added_by_content.clear();
    for (size_t i = 0; i < added.size(); ++i) {
        if (added[i].content.empty()) continue;
        added_by_content[added[i].content] = added[i].id;
        added_by_first_byte[static_cast<unsigned char>(added[i].content[0])].push_back(int(i));
    }
    for (auto& v : added_by_first_byte)
        std::stable_sort(v.begin(), v.end(), [&](int a, int b) {
            return added[size_t(a)].content.size() > added[size_t(b)].content.size();
        });
}

// Normalise, split and BPE one stretch of text that holds no added token.
void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::string normalized = nfc ? text::nfc(text) : std::string(text);
    if (add_prefix_space && normalized[0] != ' ') normalized.insert(0, 1, ' ');
    std::vector<std::pair<size_t, size_t>> pieces{{0, normalized.size()}}, next, spans;
    for (const auto& splitter : splits) {
        next.clear();
        for (auto [b, e] : pieces) {
            splitter->split_spans(std::string_view(normalized).substr(b, e - b), spans);
            for (auto [sb, se] : spans) next.emplace_back(b + sb, b + se);
        }
        pieces.swap(next);
    }
    for (auto [b, e] : pieces)
        bpe->encode_piece(std::string_view(normalized).substr(b, e - b), out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    require_utf8(text, "tokenizer input");
    const Impl& m = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    size_t start = 0; // start of the pending ordinary text
    size_t i = 0;
    while (i < text.size()) {
        const auto& cands = m.added_by_first_byte[static_cast<unsigned char>(text[i])];
        const AddedToken* hit = nullptr;
        for (int c : cands) {
            const AddedToken& t = m.added[size_t(c)];
            if ((parse_special || !t.special) &&
                text.compare(i, t.content.size(), t.content) == 0) {
                hit = &t;
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        size_t end_before = i, after = i + hit->content.size();
        const auto ascii_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
        if (hit->lstrip)
            while (end_before > start && ascii_space(text[end_before - 1])) --end_before;
        if (hit->rstrip)
            while (after < text.size() && ascii_space(text[after])) ++after;
        m.encode_text(text.substr(start, end_before - start), out);
        out.push_back(hit->id);
        start = i = after;
    }
    m.encode_text(text.substr(start), out);
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids) {
        if (skip_special && is_special(id)) continue;
        bytes += token_bytes(id);
    }
    return utf8_lossy(bytes);
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    require(id >= 0 && size_t(id) < impl_->id_bytes.size() && impl_->id_kind[size_t(id)] != 0,
            "token id ", id, " is not in the tokenizer's vocabulary");
    return impl_->id_bytes[size_t(id)];
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && size_t(id) < impl_->id_kind.size() && impl_->id_kind[size_t(id)] == 3;
}

bool Tokenizer::is_added(int32_t id) const {
    return id >= 0 && size_t(id) < impl_->id_kind.size() && impl_->id_kind[size_t(id)] >= 2;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
    auto a = impl_->added_by_content.find(std::string(text));
    if (a != impl_->added_by_content.end()) return a->second;
    auto v = impl_->bpe->vocab().find(std::string(text));
    if (v != impl_->bpe->vocab().end()) return v->second;
    return std::nullopt;
}

int32_t Tokenizer::vocab_size() const {
    return int32_t(impl_->id_bytes.size());
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return impl_->added;
}

} // namespace ninfer::text
