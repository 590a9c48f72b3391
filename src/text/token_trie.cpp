#include "text/token_trie.h"

#include <algorithm>
#include <mutex>
#include <string_view>

#include "core/error.h"

namespace ninfer::text {
namespace {

struct Entry {
    std::string_view bytes;
    int32_t id;
};

class Builder {
public:
    Builder(TokenTrie& t, const std::vector<Entry>& entries) : t_(t), e_(entries) {}

    // Fills nodes[index] with the tokens e_[l, r), which share their first `depth` bytes.
    void build(uint32_t index, uint32_t l, uint32_t r, size_t depth) {
        uint32_t own = l;
        while (own < r && e_[own].bytes.size() == depth) ++own;
        uint32_t groups = 0;
        for (uint32_t i = own; i < r;) {
            const uint8_t b = uint8_t(e_[i].bytes[depth]);
            while (i < r && uint8_t(e_[i].bytes[depth]) == b) ++i;
            ++groups;
        }
        const uint32_t first = uint32_t(t_.nodes.size());
        t_.nodes.resize(t_.nodes.size() + groups);
        {
            TokenTrie::Node& n = t_.nodes[index];
            n.tok_begin = l, n.tok_own_end = own, n.tok_end = r;
            n.first_child = first, n.n_children = uint16_t(groups);
        }
        uint32_t child = first;
        for (uint32_t i = own; i < r; ++child) {
            const uint8_t b = uint8_t(e_[i].bytes[depth]);
            const uint32_t start = i;
            while (i < r && uint8_t(e_[i].bytes[depth]) == b) ++i;
            t_.nodes[child].byte = b;
            t_.nodes[child].chars =
                uint16_t(std::min(0xFFFF, t_.nodes[index].chars + ((b & 0xC0) != 0x80)));
            build(child, start, i, depth + 1);
        }
        uint8_t safe = 0xFF;
        uint32_t chars = 0;
        for (uint32_t c = first; c < first + groups; ++c) {
            const TokenTrie::Node& ch = t_.nodes[c];
            chars = std::max<uint32_t>(chars, ch.max_chars + ((ch.byte & 0xC0) != 0x80));
            for (uint8_t s = 0; s < 8; ++s) {
                const uint8_t next = string_byte(s, ch.byte);
                if (next == kUtf8Invalid || !(ch.string_safe >> next & 1)) safe &= ~(1u << s);
            }
        }
        TokenTrie::Node& n = t_.nodes[index];
        n.string_safe = safe;
        n.max_chars = uint16_t(std::min<uint32_t>(chars, 0xFFFF));
    }

private:
    TokenTrie& t_;
    const std::vector<Entry>& e_;
};

} // namespace

std::shared_ptr<const TokenTrie> TokenTrie::build(const Tokenizer& tok) {
    auto trie = std::make_shared<TokenTrie>();
    trie->tokenizer = tok;
    trie->vocab_size = tok.vocab_size();
    std::vector<Entry> entries;
    entries.reserve(size_t(trie->vocab_size));
    std::vector<uint8_t> added(size_t(trie->vocab_size), 0);
    for (const auto& a : tok.added_tokens())
        if (a.id >= 0 && a.id < trie->vocab_size) added[size_t(a.id)] = 1;
    for (int32_t id = 0; id < trie->vocab_size; ++id) {
        if (added[size_t(id)] || tok.is_added(id)) continue;
        const std::string* bytes = nullptr;
        try {
            bytes = &tok.token_bytes(id);
        } catch (const Error&) {
            continue; // a hole in the vocabulary
        }
        if (!bytes->empty()) entries.push_back({*bytes, id});
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.bytes < b.bytes; });
    trie->order.reserve(entries.size());
    for (const auto& e : entries) {
        trie->order.push_back(e.id);
        size_t chars = 0;
        for (char c : e.bytes) chars += (uint8_t(c) & 0xC0) != 0x80;
        trie->chars.push_back(uint16_t(std::min<size_t>(chars, 0xFFFF)));
    }
    trie->id_chars.assign(size_t(trie->vocab_size), 0);
    for (auto& p : trie->plain) p.assign(size_t(trie->vocab_size), 0);
    for (size_t i = 0; i < entries.size(); ++i) {
        const size_t id = size_t(entries[i].id);
        trie->id_chars[id] = trie->chars[i];
        for (uint8_t s = 0; s < 8; ++s) {
            uint8_t state = s;
            for (char c : entries[i].bytes)
                if ((state = string_byte(state, uint8_t(c))) == kUtf8Invalid) break;
            trie->plain[s][id] = state != kUtf8Invalid;
        }
    }
    trie->nodes.reserve(entries.size() * 3);
    trie->nodes.resize(1);
    Builder(*trie, entries).build(0, 0, uint32_t(entries.size()), 0);
    trie->nodes.shrink_to_fit();
    return trie;
}

std::shared_ptr<const TokenTrie> TokenTrie::get(const Tokenizer& tok) {
    static std::mutex mutex;
    // Most recently used first. The key is the address of the tokenizer's shared data (one per
    // loaded tokenizer, kept alive by the trie's copy of the tokenizer).
    static std::vector<std::pair<const void*, std::shared_ptr<const TokenTrie>>> cache;
    const void* key = &tok.added_tokens();
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < cache.size(); ++i) {
        if (cache[i].first != key) continue;
        std::rotate(cache.begin(), cache.begin() + long(i), cache.begin() + long(i) + 1);
        return cache.front().second;
    }
    auto trie = build(tok);
    cache.insert(cache.begin(), {key, trie});
    if (cache.size() > 4) cache.pop_back();
    return trie;
}

} // namespace ninfer::text
