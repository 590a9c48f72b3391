#include "text/bpe.h"

#include <queue>

#include "core/error.h"

namespace ninfer::text {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
    for (int b = 0; b < 256; ++b) {
        auto it = vocab_.find(std::string(1, char(b)));
        byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
    }
    merges_.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
        const auto& [a, b] = merges[r];
        auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
        require(ia != vocab_.end() && ib != vocab_.end() && ic != vocab_.end(),
                "tokenizer.json: merge ", r, " uses a token missing from the vocabulary");
        merges_.emplace(key(ia->second, ib->second), Merge{int32_t(r), ic->second});
    }
}

// HF word.merge_all without dropout: repeatedly merge the lowest-ranked adjacent pair, the
// leftmost first among equal ranks.
void BpeModel::merge_word(std::vector<int32_t>& ids) const {
    struct Sym {
        int32_t id;
        int prev, next;
        bool alive;
    };
    struct Cand {
        int32_t rank;
        int pos;
        int32_t id;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const int n = int(ids.size());
    std::vector<Sym> s(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
        s[size_t(i)] = {ids[size_t(i)], i - 1, i + 1 < n ? i + 1 : -1, true};
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    const auto push = [&](int left) {
        const int right = s[size_t(left)].next;
        if (right < 0) return;
        auto it = merges_.find(key(s[size_t(left)].id, s[size_t(right)].id));
        if (it != merges_.end()) heap.push({it->second.rank, left, it->second.id});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
        const Cand c = heap.top();
        heap.pop();
        Sym& left = s[size_t(c.pos)];
        if (!left.alive || left.next < 0) continue;
        Sym& right = s[size_t(left.next)];
        auto it = merges_.find(key(left.id, right.id));
        if (it == merges_.end() || it->second.id != c.id) continue; // stale candidate
        left.id = c.id;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) s[size_t(right.next)].prev = c.pos;
        if (left.prev >= 0) push(left.prev);
        push(c.pos);
    }
    ids.clear();
    for (int i = 0; i >= 0 && i < n; i = s[size_t(i)].next) ids.push_back(s[size_t(i)].id);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.empty()) return;
    if (ignore_merges_) {
        auto it = vocab_.find(std::string(piece));
        if (it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const bool cacheable = piece.size() <= kCachePieceMax;
    std::string k;
    if (cacheable) {
        k.assign(piece);
        std::lock_guard<std::mutex> lock(cache_mutex_);
        auto it = cache_.find(k);
        if (it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int32_t> ids;
    ids.reserve(piece.size());
    for (char ch : piece) {
        const int32_t id = byte_ids_[static_cast<unsigned char>(ch)];
        if (id < 0)
            fail(ErrorCategory::Unsupported, "tokenizer: byte ",
                 int(static_cast<unsigned char>(ch)),
                 " has no token (not a byte-level vocabulary)");
        ids.push_back(id);
    }
    if (ids.size() > 1) merge_word(ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() >= kCacheMax) cache_.clear();
        cache_.emplace(std::move(k), std::move(ids));
    }
}

} // namespace ninfer::text
