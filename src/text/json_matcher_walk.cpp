// The JSON matcher's byte feeding and token masks: a depth-first walk of the vocabulary trie
// with the matcher's threads (json_matcher.h).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/json_matcher.h"

namespace ninfer::text::json {

bool Matcher::advance(uint8_t byte) {
    const Marks m = marks();
    next_.clear();
    for (const Thread& t : threads_) feed(t, byte, next_);
    dedupe(next_, 0);
    if (next_.empty()) {
        restore(m);
        return false;
    }
    threads_.swap(next_);
    return true;
}

bool Matcher::advance(std::string_view bytes) {
    const Marks m = marks();
    const std::vector<Thread> saved = threads_;
    for (char c : bytes) {
        if (advance(uint8_t(c))) continue;
        threads_ = saved;
        restore(m);
        return false;
    }
    return true;
}

bool Matcher::accepts(std::string_view bytes) {
    const Marks m = marks();
    const std::vector<Thread> saved = threads_;
    bool ok = true;
    for (char c : bytes)
        if (!(ok = advance(uint8_t(c)))) break;
    threads_ = saved;
    restore(m);
    return ok;
}

void Matcher::mark(const TokenTrie& trie, uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; ++i) {
        const auto id = size_t(trie.order[i]);
        if (id < mask_size_) mask_[id] = 1;
    }
}

int64_t Matcher::string_room(const TokenTrie::Node& n, size_t begin, size_t end) const {
    int64_t room = -1;
    for (size_t i = begin; i < end; ++i) {
        const Frame& f = scratch_[i].top;
        if ((f.kind != FrameKind::String && f.kind != FrameKind::Key) || f.phase != 0 ||
            !(n.string_safe >> f.ws & 1))
            continue;
        room = std::max(room, f.kind == FrameKind::Key
                                  ? int64_t(INT32_MAX)
                                  : int64_t(g_->nodes[f.node].max_length) - int64_t(f.a));
    }
    return room;
}

void Matcher::walk(const TokenTrie& trie, uint32_t node, size_t begin, size_t end, uint8_t plain) {
    const TokenTrie::Node& parent = trie.nodes[node];
    for (uint32_t ci = parent.first_child; ci < parent.first_child + parent.n_children; ++ci) {
        const TokenTrie::Node& child = trie.nodes[ci];
        // `plain`: the UTF-8 state of the path as plain string text from the state fill_mask
        // already allowed every plain token of (kUtf8Invalid: none, or the path left it).
        const uint8_t next = plain == kUtf8Invalid ? plain : string_byte(plain, child.byte);
        if (next != kUtf8Invalid && (child.string_safe >> next & 1)) continue;
        const size_t out = scratch_.size();
        const Marks m = marks();
        for (size_t i = begin; i < end; ++i) feed(scratch_[i], child.byte, scratch_);
        if (scratch_.size() > out) {
            dedupe(scratch_, out);
            mark(trie, child.tok_begin, child.tok_own_end);
            if (child.tok_own_end < child.tok_end) {
                // Below a node whose every token is plain string text for some thread: all
                // the tokens, or (one thread, a length limit) those short enough.
                const int64_t room = string_room(child, out, scratch_.size());
                if (room >= child.max_chars) {
                    mark(trie, child.tok_own_end, child.tok_end);
                } else if (room >= 0 && scratch_.size() - out == 1) {
                    for (uint32_t i = child.tok_own_end; i < child.tok_end; ++i)
                        if (trie.chars[i] - child.chars <= room &&
                            size_t(trie.order[i]) < mask_size_)
                            mask_[trie.order[i]] = 1;
                } else {
                    walk(trie, ci, out, scratch_.size(), next);
                }
            }
            scratch_.resize(out);
        }
        restore(m);
    }
}

void Matcher::fill_mask(const TokenTrie& trie, uint8_t* mask, size_t size) {
    mask_ = mask, mask_size_ = size;
    // A thread inside a string body: every token of plain text (that fits) is allowed, from
    // the trie's tables; the walk then skips the subtrees made of such tokens only.
    uint8_t plain = kUtf8Invalid;
    int64_t room = -1;
    for (const Thread& t : threads_) {
        const Frame& f = t.top;
        if ((f.kind != FrameKind::String && f.kind != FrameKind::Key) || f.phase != 0) continue;
        const int64_t r = f.kind == FrameKind::Key
                              ? int64_t(INT32_MAX)
                              : int64_t(g_->nodes[f.node].max_length) - int64_t(f.a);
        if (r >= trie.nodes[0].max_chars || threads_.size() == 1) {
            plain = f.ws, room = r;
            break;
        }
    }
    if (plain != kUtf8Invalid) {
        const size_t n = std::min(size, trie.plain[plain].size());
        const uint8_t* p = trie.plain[plain].data();
        if (room >= trie.nodes[0].max_chars) {
            for (size_t i = 0; i < n; ++i) mask[i] |= p[i];
        } else {
            const uint16_t* chars = trie.id_chars.data();
            const uint16_t r = uint16_t(room); // room < max_chars <= 0xFFFF
            for (size_t i = 0; i < n; ++i) mask[i] |= p[i] & uint8_t(chars[i] <= r);
        }
    }
    scratch_.assign(threads_.begin(), threads_.end());
    const Marks m = marks();
    walk(trie, 0, 0, scratch_.size(), plain);
    restore(m);
    scratch_.clear();
}

namespace {

// The preference order of greedy_completion: closing quotes and brackets first, then the
// shortest literals and digits, then letters, then any printable byte, then the bytes >= 0x80
// (a string may stop inside a UTF-8 sequence, as byte-level tokens split characters: only a
// continuation byte goes on from there).
const std::string& completion_order() {
    static const std::string order = [] {
        std::string o = "\"]}0el,:uarsntf";
        for (int c = 'a'; c <= 'z'; ++c) o += char(c);
        for (int c = 32; c < 127; ++c) o += char(c);
        for (int c = 0x80; c <= 0xFF; ++c) o += char(c);
        return o;
    }();
    return order;
}

// The plain greedy walk: at each step the first byte of completion_order() the matcher takes.
// A bounded number of advance calls is charged to `work`.
std::optional<std::string> plain_greedy(Matcher m, int max_steps, int64_t& work) {
    std::string out;
    for (int step = 0; step < max_steps; ++step) {
        if (m.can_end()) return out;
        bool moved = false;
        for (char c : completion_order()) {
            ++work;
            if (m.advance(uint8_t(c))) {
                out += c;
                moved = true;
                break;
            }
        }
        if (!moved) return std::nullopt;
    }
    return std::nullopt;
}

// The advance calls the lookahead of greedy_completion may spend (it runs only where the plain
// walk fails: a few milliseconds).
constexpr int64_t kLookaheadWork = 400000;
// Bytes the plain walk may take after a lookahead byte: a completion found there is short (the
// missing key's name, a value, the closing brackets), and a longer horizon would spend the work
// on walks that never end.
constexpr int kLookaheadHorizon = 48;

// Multi-byte steps the lookahead tries besides single bytes: every required key of the grammar
// as dumped ("name", quotes included) and without its opening quote (for a key already opened).
// A missing required key longer than one byte is out of reach of single bytes: the plain walk
// closes every key it opens at once.
std::vector<std::string> required_key_steps(const Grammar& g) {
    std::vector<std::string> steps;
    for (const Node& n : g.nodes) {
        if (n.kind != NodeKind::Object) continue;
        for (const Property& p : n.props) {
            if (!p.required) continue;
            const std::string text = nlohmann::json(p.name).dump();
            for (std::string step : {text, text.substr(1)})
                if (step.size() > 1 && std::find(steps.begin(), steps.end(), step) == steps.end())
                    steps.push_back(std::move(step));
        }
    }
    return steps;
}

} // namespace

// The plain walk can run forever where a closing byte is always allowed but never completes the
// value: an object that lacks a required key its properties do not declare (any key is allowed;
// the walk writes "", "}", "}}", ... and never the missing name). Then each step looks one byte
// ahead: a required key of the grammar, or the first byte of the order, after which the plain
// walk finishes; else the plain walk's own byte. A deterministic function of the state, so the text after its first byte is still the
// completion of the state after that byte.
std::optional<std::string> greedy_completion(Matcher m, int max_steps) {
    int64_t work = 0;
    if (auto plain = plain_greedy(m, max_steps, work)) return plain;
    const std::vector<std::string> key_steps = required_key_steps(m.grammar());
    std::string out;
    for (int step = 0; step < max_steps && work < kLookaheadWork; ++step) {
        if (m.can_end()) return out;
        const int left = max_steps - step - 1;
        for (const std::string& key : key_steps) {
            Matcher next = m;
            ++work;
            if (!next.advance(std::string_view(key))) continue;
            if (auto rest = plain_greedy(next, std::min(left, kLookaheadHorizon), work))
                return out + key + *rest;
        }
        std::optional<char> first; // the plain walk's byte
        for (char c : completion_order()) {
            Matcher next = m;
            ++work;
            if (!next.advance(uint8_t(c))) continue;
            if (!first) first = c;
            if (auto rest = plain_greedy(next, std::min(left, kLookaheadHorizon), work))
                return out + c + *rest;
            if (work >= kLookaheadWork) break;
        }
        if (!first) return std::nullopt;
        m.advance(uint8_t(*first));
        out += *first;
    }
    return std::nullopt;
}

} // namespace ninfer::text::json
