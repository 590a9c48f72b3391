// Byte-level matcher of JSON text against a compiled schema (json_schema.h): a pushdown
// automaton run over a set of alternative stacks (threads; anyOf branches split them at a value's
// first byte, dead ones are dropped, identical ones merged). Every prefix it accepts can still be
// completed to a valid document, so a token is allowed exactly when the matcher accepts all its
// bytes. Stacks are persistent (frames below the top live in an append-only arena), so the token
// mask is a depth-first walk of the vocabulary's byte trie (token_trie.h) that copies only
// the top frames, and whole subtrees of plain string content are allowed at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/json_schema.h"
#include "text/token_trie.h"

namespace ninfer::text::json {

enum class FrameKind : uint8_t { Root, Object, Array, String, Key, KeyLit, Number, Literal };

// One level of a stack. Field use by kind (see json_matcher.cpp):
//   Object: phase, ws (whitespace in the current gap), a = seen-properties bitset (offset into
//           the bits arena, kNone: none seen), b = current property (kNone: additional),
//           c = head of the list of additional keys' hashes.
//   Array:  phase, ws, a = items started.
//   String/Key: phase (escape state), ws = UTF-8 state, aux = hex digits, g = \u values,
//           a = code points (String) or decoded bytes (Key), Key: [b, c) candidate declared
//           names (Node::by_name), h = hash of the decoded key.
//   KeyLit: node = the object, a = position, [b, c) candidates (Node::key_texts), d = the
//           object's seen-properties offset.
//   Number: phase, aux = negative, a/b/c = integer/fraction/exponent digits, h/g = integer and
//           fraction digits' values.
//   Literal: a = position, [b, c) candidates (Node::texts).
struct Frame {
    uint32_t node = 0;
    FrameKind kind = FrameKind::Root;
    uint8_t phase = 0;
    uint8_t ws = 0;
    uint8_t aux = 0;
    uint32_t a = 0, b = 0, c = 0, d = 0;
    uint64_t h = 0, g = 0;
    bool operator==(const Frame&) const = default;
};

struct Thread {
    Frame top;
    uint32_t below = kNone; // the rest of the stack: an index into the link arena
    uint32_t size = 1;      // frames, including top
    bool operator==(const Thread&) const = default;
};

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> grammar);

    // Feeds one byte / all of `bytes`; false (and no change) when that breaks the grammar.
    bool advance(uint8_t byte);
    bool advance(std::string_view bytes);
    // Whether the text so far is a complete value (the end may come now).
    bool can_end() const;
    // Whether `bytes` could follow now (the state is unchanged).
    bool accepts(std::string_view bytes);

    // Sets mask[id] = 1 for every token of `trie` whose bytes may come next (ids >= size are
    // skipped; nothing is cleared).
    void fill_mask(const TokenTrie& trie, uint8_t* mask, size_t size);

    const Grammar& grammar() const { return *g_; }
    size_t threads() const { return threads_.size(); }

private:
    struct Link {
        Frame frame;
        uint32_t below;
    };
    struct HashLink {
        uint64_t hash;
        uint32_t prev;
    };
    struct Marks {
        size_t links, bits, hashes;
    };

    void feed(Thread t, uint8_t c, std::vector<Thread>& out);
    void start_value(const Thread& t, uint32_t node, uint8_t c, std::vector<Thread>& out);
    void start_leaf(const Thread& t, uint32_t node, uint8_t c, std::vector<Thread>& out);
    bool whitespace_step(Thread& t, uint8_t c, std::vector<Thread>& out) const;
    void object_step(Thread& t, uint8_t c, std::vector<Thread>& out);
    void array_step(Thread& t, uint8_t c, std::vector<Thread>& out);
    void start_key(const Thread& t, std::vector<Thread>& out);
    bool key_literal_step(Frame& k, uint8_t c, uint32_t object_size);
    bool key_done(Frame& obj, const Frame& key, uint32_t size);
    void push(Thread& t, const Frame& f);
    bool pop(Thread& t);
    bool fits(const Thread& t, uint32_t node) const;
    bool seen(uint32_t bits, uint32_t prop) const;
    uint32_t with_seen(uint32_t bits, const Node& n, uint32_t prop);
    bool required_done(const Frame& obj, const Node& n) const;
    bool can_add_key(const Thread& t, const Node& n) const;
    bool thread_can_end(Thread t) const;
    void dedupe(std::vector<Thread>& v, size_t begin) const;
    Marks marks() const { return {links_.size(), bits_.size(), hashes_.size()}; }
    void restore(const Marks& m);
    void walk(const TokenTrie& trie, uint32_t node, size_t begin, size_t end, uint8_t plain);
    void mark(const TokenTrie& trie, uint32_t from, uint32_t to);
    // Most code points that some thread among scratch_[begin, end) may still add to a string
    // with every token below `n` (-1: none can take them all as plain text).
    int64_t string_room(const TokenTrie::Node& n, size_t begin, size_t end) const;

    std::shared_ptr<const Grammar> g_;
    std::vector<Thread> threads_, next_, scratch_;
    std::vector<Link> links_;
    std::vector<uint64_t> bits_;
    std::vector<HashLink> hashes_;
    uint8_t* mask_ = nullptr;
    size_t mask_size_ = 0;
};

// A short completion of the matcher's text to a complete value, found greedily (closing quotes
// and brackets first, then the shortest literals and digits, then any printable byte): the
// same state always gives the same text, and the text after its first byte is the completion
// of the state after that byte. nullopt when none is found within `max_steps` bytes.
std::optional<std::string> greedy_completion(Matcher m, int max_steps = 128);

namespace detail {
enum class Step : uint8_t { Continue, Closed, Ended, Dead };
// Scalar frames (json_matcher_scalar.cpp). Closed: the byte completed the value; Ended: the
// value was complete and the byte belongs to the parent.
Step string_step(Frame& f, const Node& n, uint8_t c); // String, or Key (n: the object)
Step number_step(Frame& f, const Node& n, uint8_t c);
bool number_complete(const Frame& f, const Node& n);
Step literal_step(Frame& f, const std::vector<std::string>& texts, uint8_t c);
// Narrows the sorted candidates [lo, hi) (at(i): the i-th string; all share their first `pos`
// bytes) to those whose byte at `pos` is c.
template <typename At>
void narrow(const At& at, uint32_t& lo, uint32_t& hi, size_t pos, uint8_t c) {
    auto below = [&](uint32_t i) { // at(i)[pos] < c, a string that ends at pos counting as less
        const std::string& s = at(i);
        return s.size() <= pos || uint8_t(s[pos]) < c;
    };
    uint32_t l = lo, r = hi;
    while (l < r) {
        const uint32_t m = l + (r - l) / 2;
        if (below(m))
            l = m + 1;
        else
            r = m;
    }
    uint32_t e = l;
    r = hi;
    while (e < r) {
        const uint32_t m = e + (r - e) / 2;
        if (uint8_t(at(m)[pos]) == c)
            e = m + 1;
        else
            r = m;
    }
    lo = l, hi = e;
}
bool literal_complete(const Frame& f, const std::vector<std::string>& texts);
} // namespace detail

} // namespace ninfer::text::json
