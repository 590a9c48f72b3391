// The JSON matcher's byte feeding and token masks: a depth-first walk of the vocabulary trie
// with the matcher's threads (json_matcher.h).
#include <algorithm>

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

void Matcher::walk(const TokenTrie& trie, uint32_t node, size_t begin, size_t end) {
    const TokenTrie::Node& parent = trie.nodes[node];
    for (uint32_t ci = parent.first_child; ci < parent.first_child + parent.n_children; ++ci) {
        const TokenTrie::Node& child = trie.nodes[ci];
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
                    walk(trie, ci, out, scratch_.size());
                }
            }
            scratch_.resize(out);
        }
        restore(m);
    }
}

void Matcher::fill_mask(const TokenTrie& trie, uint8_t* mask, size_t size) {
    mask_ = mask, mask_size_ = size;
    scratch_.assign(threads_.begin(), threads_.end());
    const Marks m = marks();
    walk(trie, 0, 0, scratch_.size());
    restore(m);
    scratch_.clear();
}

} // namespace ninfer::text::json
