// The JSON matcher: threads of persistent stacks, containers and keys, and the trie walk that
// computes token masks. Scalars (strings, numbers, literals) are in json_matcher_scalar.cpp.
#include "text/json_matcher.h"

#include "core/error.h"

namespace ninfer::text::json {
namespace {

enum ObjectPhase : uint8_t {
    kObjOpen,
    kObjAfterKey,
    kObjAfterColon,
    kObjAfterValue,
    kObjAfterComma
};
enum ArrayPhase : uint8_t { kArrOpen, kArrAfterValue, kArrAfterComma };
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr size_t kMaxThreads = 256;

} // namespace

using detail::Step;

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
    require(g_ != nullptr, "JSON matcher: no grammar");
    Thread t;
    t.top.kind = FrameKind::Root;
    t.top.node = g_->root;
    threads_.push_back(t);
}

void Matcher::push(Thread& t, const Frame& f) {
    links_.push_back({t.top, t.below});
    t.below = uint32_t(links_.size() - 1);
    t.top = f;
    ++t.size;
}

bool Matcher::pop(Thread& t) {
    const Frame child = t.top;
    const Link& l = links_[t.below];
    t.top = l.frame;
    t.below = l.below;
    --t.size;
    if (child.kind == FrameKind::Key || child.kind == FrameKind::KeyLit)
        return key_done(t.top, child, t.size);
    return true;
}

bool Matcher::fits(const Thread& t, uint32_t node) const {
    return node != kNone && t.size + g_->nodes[node].need <= uint32_t(g_->options.max_depth);
}

bool Matcher::seen(uint32_t bits, uint32_t prop) const {
    return bits != kNone && (bits_[bits + prop / 64] >> (prop % 64) & 1);
}

uint32_t Matcher::with_seen(uint32_t bits, const Node& n, uint32_t prop) {
    const size_t words = (n.props.size() + 63) / 64, at = bits_.size();
    for (size_t w = 0; w < words; ++w) bits_.push_back(bits == kNone ? 0 : bits_[bits + w]);
    bits_[at + prop / 64] |= uint64_t(1) << (prop % 64);
    return uint32_t(at);
}

bool Matcher::required_done(const Frame& obj, const Node& n) const {
    for (uint32_t p = 0; p < n.props.size(); ++p)
        if (n.props[p].required && !seen(obj.a, p)) return false;
    return true;
}

bool Matcher::can_add_key(const Thread& t, const Node& n) const {
    if (fits(t, n.additional)) return true;
    for (uint32_t p = 0; p < n.props.size(); ++p)
        if (!seen(t.top.a, p) && fits(t, n.props[p].node)) return true;
    return false;
}

void Matcher::feed(Thread t, uint8_t c, std::vector<Thread>& out) {
    for (;;) {
        Frame& f = t.top;
        const Node& n = g_->nodes[f.node];
        switch (f.kind) {
        case FrameKind::Root:
            if (f.phase) return; // nothing after the value
            f.phase = 1;
            start_value(t, f.node, c, out);
            return;
        case FrameKind::Object:
            object_step(t, c, out);
            return;
        case FrameKind::Array:
            array_step(t, c, out);
            return;
        case FrameKind::String:
        case FrameKind::Key: {
            const Step s = detail::string_step(f, n, c);
            if (s == Step::Dead || (s == Step::Closed && !pop(t))) return;
            out.push_back(t);
            return;
        }
        case FrameKind::KeyLit:
            if (!key_literal_step(f, c, t.size - 1)) return;
            // Key texts end with their only unescaped quote: one candidate left, fully read.
            if (f.a == n.key_texts[f.b].size() && !pop(t)) return;
            out.push_back(t);
            return;
        case FrameKind::Number:
        case FrameKind::Literal: {
            const Step s = f.kind == FrameKind::Number ? detail::number_step(f, n, c)
                                                       : detail::literal_step(f, n.texts, c);
            if (s == Step::Dead) return;
            if (s == Step::Continue) {
                out.push_back(t);
                return;
            }
            pop(t);
            if (s == Step::Closed) {
                out.push_back(t);
                return;
            }
            break; // Ended: the parent takes the byte
        }
        }
    }
}

void Matcher::start_value(const Thread& t, uint32_t node, uint8_t c, std::vector<Thread>& out) {
    const Node& n = g_->nodes[node];
    if (n.kind != NodeKind::Union) {
        start_leaf(t, node, c, out);
        return;
    }
    for (uint32_t alt : n.alts) start_leaf(t, alt, c, out);
}

void Matcher::start_leaf(const Thread& t, uint32_t node, uint8_t c, std::vector<Thread>& out) {
    const Node& n = g_->nodes[node];
    if (!n.first.test(c) || !fits(t, node)) return;
    Thread u = t;
    Frame f;
    f.node = node;
    switch (n.kind) {
    case NodeKind::Object:
        f.kind = FrameKind::Object;
        f.a = f.b = f.c = kNone;
        break;
    case NodeKind::Array:
        f.kind = FrameKind::Array;
        break;
    case NodeKind::String:
        f.kind = FrameKind::String;
        break;
    case NodeKind::Number:
    case NodeKind::Integer:
        f.kind = FrameKind::Number;
        if (detail::number_step(f, n, c) != Step::Continue) return;
        break;
    case NodeKind::Literal: {
        f.kind = FrameKind::Literal;
        f.c = uint32_t(n.texts.size());
        const Step s = detail::literal_step(f, n.texts, c);
        if (s == Step::Dead) return;
        if (s == Step::Closed) { // a one-byte value
            out.push_back(u);
            return;
        }
        break;
    }
    case NodeKind::Union:
        return; // flattened away
    }
    push(u, f);
    out.push_back(u);
}

// Whitespace between the tokens of an object or array: the thread goes on while the gap stays
// within options.max_whitespace. True when c was whitespace (handled here).
bool Matcher::whitespace_step(Thread& t, uint8_t c, std::vector<Thread>& out) const {
    if (!g_->whitespace.test(c)) return false;
    if (t.top.ws < g_->options.max_whitespace) {
        ++t.top.ws;
        out.push_back(t);
    }
    return true;
}

void Matcher::object_step(Thread& t, uint8_t c, std::vector<Thread>& out) {
    Frame& f = t.top;
    const Node& n = g_->nodes[f.node];
    if (whitespace_step(t, c, out)) return;
    switch (f.phase) {
    case kObjOpen:
    case kObjAfterComma:
        if (c == '"') {
            if (can_add_key(t, n)) start_key(t, out);
        } else if (c == '}' && f.phase == kObjOpen && required_done(f, n)) {
            if (pop(t)) out.push_back(t);
        }
        return;
    case kObjAfterKey:
        if (c == ':') {
            f.phase = kObjAfterColon, f.ws = 0;
            out.push_back(t);
        }
        return;
    case kObjAfterColon: {
        const uint32_t value = f.b == kNone ? n.additional : n.props[f.b].node;
        f.phase = kObjAfterValue, f.ws = 0;
        start_value(t, value, c, out);
        return;
    }
    case kObjAfterValue:
        if (c == ',') {
            if (!can_add_key(t, n)) return;
            f.phase = kObjAfterComma, f.ws = 0;
            out.push_back(t);
        } else if (c == '}' && required_done(f, n)) {
            if (pop(t)) out.push_back(t);
        }
        return;
    default:
        return;
    }
}

void Matcher::start_key(const Thread& t, std::vector<Thread>& out) {
    const Node& n = g_->nodes[t.top.node];
    Thread u = t;
    u.top.phase = kObjAfterKey, u.top.ws = 0;
    Frame k;
    k.node = t.top.node;
    if (fits(t, n.additional)) { // any key: declared names are recognised when it closes
        k.kind = FrameKind::Key;
        k.c = uint32_t(n.props.size());
        k.h = kFnvOffset;
    } else { // one of the declared keys not yet seen
        k.kind = FrameKind::KeyLit;
        k.c = uint32_t(n.key_texts.size());
        k.d = t.top.a;
        if (!key_literal_step(k, '"', t.size)) return;
    }
    push(u, k);
    out.push_back(u);
}

bool Matcher::key_literal_step(Frame& k, uint8_t c, uint32_t object_size) {
    const Node& n = g_->nodes[k.node];
    detail::narrow([&](uint32_t i) -> const std::string& { return n.key_texts[i]; }, k.b, k.c, k.a,
                   c);
    ++k.a;
    Thread probe; // the object, for fits()
    probe.size = object_size;
    for (uint32_t i = k.b; i < k.c; ++i) {
        const uint32_t p = n.key_prop[i];
        if (!seen(k.d, p) && fits(probe, n.props[p].node)) return true;
    }
    return false;
}

bool Matcher::key_done(Frame& obj, const Frame& key, uint32_t size) {
    const Node& n = g_->nodes[obj.node];
    uint32_t prop = kNone;
    if (key.kind == FrameKind::KeyLit) {
        prop = n.key_prop[key.b];
    } else if (key.b < key.c && n.props[n.by_name[key.b]].name.size() == key.a) {
        prop = n.by_name[key.b];
        Thread probe;
        probe.size = size;
        if (seen(obj.a, prop) || !fits(probe, n.props[prop].node)) return false;
    }
    if (prop != kNone) {
        obj.a = with_seen(obj.a, n, prop);
        obj.b = prop;
        return true;
    }
    for (uint32_t i = obj.c; i != kNone; i = hashes_[i].prev)
        if (hashes_[i].hash == key.h) return false; // a repeated key (or a hash collision)
    hashes_.push_back({key.h, obj.c});
    obj.c = uint32_t(hashes_.size() - 1);
    obj.b = kNone;
    return true;
}

void Matcher::array_step(Thread& t, uint8_t c, std::vector<Thread>& out) {
    Frame& f = t.top;
    const Node& n = g_->nodes[f.node];
    if (whitespace_step(t, c, out)) return;
    if (f.phase == kArrAfterValue) {
        if (c == ',') {
            if (f.a >= n.max_items || !fits(t, n.item_at(f.a))) return;
            f.phase = kArrAfterComma, f.ws = 0;
            out.push_back(t);
        } else if (c == ']' && f.a >= n.min_items) {
            if (pop(t)) out.push_back(t);
        }
        return;
    }
    if (c == ']') {
        if (f.phase == kArrOpen && n.min_items == 0 && pop(t)) out.push_back(t);
        return;
    }
    if (f.a >= n.max_items) return;
    const uint32_t item = n.item_at(f.a);
    if (item == kNone) return;
    ++f.a;
    f.phase = kArrAfterValue, f.ws = 0;
    start_value(t, item, c, out);
}

bool Matcher::thread_can_end(Thread t) const {
    for (;;) {
        const Frame& f = t.top;
        const Node& n = g_->nodes[f.node];
        if (f.kind == FrameKind::Root) return f.phase == 1;
        const bool complete =
            (f.kind == FrameKind::Number && detail::number_complete(f, n)) ||
            (f.kind == FrameKind::Literal && detail::literal_complete(f, n.texts));
        if (!complete) return false;
        const Link& l = links_[t.below];
        t.top = l.frame, t.below = l.below, --t.size;
    }
}

bool Matcher::can_end() const {
    for (const Thread& t : threads_)
        if (thread_can_end(t)) return true;
    return false;
}

void Matcher::dedupe(std::vector<Thread>& v, size_t begin) const {
    size_t kept = begin;
    for (size_t i = begin; i < v.size(); ++i) {
        bool dup = false;
        for (size_t j = begin; j < kept && !dup; ++j) dup = v[j] == v[i];
        if (!dup) v[kept++] = v[i];
    }
    v.resize(kept);
    if (kept - begin > kMaxThreads)
        fail_invalid("JSON constraint: the schema is too ambiguous here (more than ", kMaxThreads,
                     " alternatives alive)");
}

void Matcher::restore(const Marks& m) {
    links_.resize(m.links);
    bits_.resize(m.bits);
    hashes_.resize(m.hashes);
}

} // namespace ninfer::text::json
