#include "text/tool_call_constraint.h"

#include <algorithm>
#include <bitset>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "text/json_matcher.h"
#include "text/json_schema.h"
#include "text/token_trie.h"
#include "text/tool_call_format.h"

namespace ninfer::text {
namespace {

using OJson = nlohmann::ordered_json;
constexpr std::string_view kTerm = "\n</parameter>\n";
constexpr size_t kTermDecided = 13; // "\n</parameter>" seen: the value has ended
constexpr int kInf = INT_MAX / 4;
constexpr int kJsonMargin = 24; // tokens kept free before JSON values must close
// Texts a raw value may not contain: the parser would end the value or the call there.
constexpr std::string_view kBanned[] = {
    "<parameter=", "</parameter>", "<function=", "</function>", "<tool_call>", "</tool_call>"};

enum class Act : uint8_t { Function, Param, Close, ParamDone };

struct Lit {
    std::string text;
    Act act;
    int arg = 0;
    std::vector<int> cost; // cost[pos]: fewest tokens spelling text[pos:]
};
using LitSet = std::vector<Lit>; // sorted by text

struct Param {
    std::string name;
    bool required = false;
    enum class Mode { Raw, Enum, Json } mode = Mode::Raw;
    uint32_t min_len = 0, max_len = UINT32_MAX;
    int enum_set = -1; // Mode::Enum: index into sets
    std::shared_ptr<const json::Grammar> grammar;
    int min_cost = 0; // fewest tokens of the value and its terminator
};

struct Function {
    std::string name;
    std::vector<Param> params;
    uint64_t required = 0;
    int choice_set = -1;
};

// Fewest tokens (of `trie`) that spell `text` from each position (one more entry: 0 at the end);
// kInf where no tokenisation exists.
using AddedTexts = std::vector<std::pair<int32_t, std::string>>;

std::vector<int> spell_costs(const TokenTrie& trie, const AddedTexts& added,
                             std::string_view text) {
    std::vector<int> c(text.size() + 1, kInf);
    c[text.size()] = 0;
    for (size_t pos = text.size(); pos-- > 0;) {
        for (const auto& [id, content] : added)
            if (text.substr(pos, content.size()) == content && c[pos + content.size()] < kInf)
                c[pos] = std::min(c[pos], 1 + c[pos + content.size()]);
        uint32_t node = 0;
        for (size_t i = pos; i < text.size(); ++i) {
            const auto& n = trie.nodes[node];
            uint32_t next = UINT32_MAX;
            for (uint32_t k = n.first_child; k < n.first_child + n.n_children; ++k)
                if (trie.nodes[k].byte == uint8_t(text[i])) {
                    next = k;
                    break;
                }
            if (next == UINT32_MAX) break;
            node = next;
            const auto& m = trie.nodes[node];
            if (m.tok_own_end > m.tok_begin && c[i + 1] < kInf)
                c[pos] = std::min(c[pos], 1 + c[i + 1]);
        }
    }
    return c;
}

// Per vocabulary (cached per trie, as the trie is per tokenizer).
struct VocabInfo {
    std::vector<uint8_t> raw_plain;    // by id: plain text in a raw value (see allowed())
    std::vector<int32_t> with_newline; // ids whose bytes hold a newline
};

std::shared_ptr<const VocabInfo> vocab_info(const std::shared_ptr<const TokenTrie>& trie) {
    static std::mutex mu;
    static std::vector<std::pair<std::weak_ptr<const TokenTrie>, std::shared_ptr<const VocabInfo>>>
        cache;
    std::lock_guard<std::mutex> lock(mu);
    std::erase_if(cache, [](const auto& e) { return e.first.expired(); });
    for (const auto& [t, info] : cache)
        if (t.lock() == trie) return info;
    auto v = std::make_shared<VocabInfo>();
    const Tokenizer& tok = trie->tokenizer;
    v->raw_plain.assign(size_t(tok.vocab_size()), 0);
    for (int32_t id : trie->order) {
        const std::string& b = tok.token_bytes(id);
        uint8_t u = 0;
        bool plain = true;
        for (char ch : b) {
            const uint8_t c = uint8_t(ch);
            if (c == 0 || c == '<' || c == '>' || c == '=' || c == '\n') plain = false;
            u = u == kUtf8Invalid ? u : utf8_step(u, c);
            if (!plain) break;
        }
        v->raw_plain[size_t(id)] = plain && u == 0;
        if (b.find('\n') != std::string::npos) v->with_newline.push_back(id);
    }
    cache.emplace_back(trie, v);
    return v;
}

struct Grammar {
    std::vector<Function> fns;
    std::vector<LitSet> sets;
    int open_first = -1, open_next = -1, term = -1;
    std::shared_ptr<const TokenTrie> trie;
    AddedTexts added; // non-special added tokens (<tool_call>, ...): allowed in fixed text
    std::shared_ptr<const VocabInfo> vocab;
    std::vector<int32_t> end_ids;
    bool parallel = true;

    int add_set(LitSet s) {
        std::sort(s.begin(), s.end(), [](const Lit& a, const Lit& b) { return a.text < b.text; });
        for (auto& l : s) l.cost = spell_costs(*trie, added, l.text);
        sets.push_back(std::move(s));
        return int(sets.size() - 1);
    }
    // Tokens from the parameter choice of `fn` with `seen` to the end: the required parameters
    // left, </function></tool_call> and an end id.
    int finish_cost(int fn, uint64_t seen) const {
        const Function& f = fns[size_t(fn)];
        const LitSet& s = sets[size_t(f.choice_set)];
        int c = 1;
        for (const Lit& l : s) {
            if (l.act == Act::Close) c += l.cost[0];
            if (l.act == Act::Param && f.params[size_t(l.arg)].required && !(seen >> l.arg & 1))
                c += l.cost[0] + f.params[size_t(l.arg)].min_cost;
        }
        return std::min(c, kInf);
    }
};

std::optional<std::string> greedy_close(const json::Matcher& m) {
    return json::greedy_completion(m);
}

struct State {
    enum class Mode : uint8_t { Lit, Raw, Json, End } mode = Mode::Lit;
    int set = 0;
    uint32_t lo = 0, hi = 0;
    uint32_t pos = 0;
    bool end_ok = false; // Lit: an end id may come instead (after a call, parallel)
    bool done = false;   // End: the end id came
    int fn = -1;
    uint64_t seen = 0;
    int param = -1;
    // Raw value
    uint32_t cps = 0, bytes = 0;
    uint8_t utf8 = 0, k = 0;
    char window[12] = {};
    uint8_t wlen = 0;
    char head[5] = {};
    std::shared_ptr<json::Matcher> jm; // Json: owned copy-on-write (shared between copies)
};

class ToolCallConstraint final : public TokenConstraint {
public:
    ToolCallConstraint(std::shared_ptr<const Grammar> g, int max_tokens)
        : g_(std::move(g)), left_(max_tokens), bounded_(max_tokens > 0) {
        start_lit(s_, g_->open_first, false);
        if (bounded_ && cost(s_) > left_) bounded_ = false; // cannot fit: length not enforced
    }

    int min_tokens() const { return cost(s_); }

    void allowed(std::vector<uint8_t>& mask) override {
        const TokenTrie& trie = *g_->trie;
        const Tokenizer& tok = trie.tokenizer;
        const int room = bounded_ ? left_ - 1 : kInf; // cost allowed after one more token
        auto end_allowed = [&] { return s_.mode == State::Mode::End || s_.end_ok; };
        if (end_allowed())
            for (int32_t id : g_->end_ids)
                if (size_t(id) < mask.size()) mask[size_t(id)] = 1;
        if (s_.mode == State::Mode::End) return;
        if (s_.mode == State::Mode::Json) {
            json_mask(mask, room);
            return;
        }
        auto try_token = [&](int32_t id) {
            if (size_t(id) >= mask.size() || mask[size_t(id)]) return;
            State t = s_;
            if (!feed(t, tok.token_bytes(id))) return;
            if (bounded_ && cost(t) > room) return;
            mask[size_t(id)] = 1;
        };
        const auto& root = trie.nodes[0];
        if (s_.mode == State::Mode::Lit) {
            for (const auto& [id, content] : g_->added) {
                State t = s_;
                if (size_t(id) >= mask.size() || !feed(t, content)) continue;
                if (bounded_ && cost(t) > room) continue;
                mask[size_t(id)] = 1;
            }
            // Only the tokens whose first byte continues a candidate.
            std::bitset<256> first;
            const LitSet& ls = set(s_);
            for (uint32_t i = s_.lo; i < s_.hi; ++i)
                if (ls[i].text.size() > s_.pos && lit_valid(s_, ls[i]))
                    first.set(uint8_t(ls[i].text[s_.pos]));
            for (uint32_t k = root.first_child; k < root.first_child + root.n_children; ++k) {
                const auto& n = trie.nodes[k];
                if (!first.test(n.byte)) continue;
                for (uint32_t i = n.tok_begin; i < n.tok_end; ++i) try_token(trie.order[i]);
            }
            return;
        }
        // Raw text: tokens of plain text (no tag or newline bytes, whole code points) are
        // allowed by their length alone when even the longest keeps room to finish (not those
        // that may go on with a terminator begun by a newline, or may make the value "null").
        const Param& p = g_->fns[size_t(s_.fn)].params[size_t(s_.param)];
        const int ub = (s_.cps >= p.min_len ? 0 : int(p.min_len - s_.cps)) +
                       g_->sets[size_t(g_->term)][0].cost[0] + g_->finish_cost(s_.fn, s_.seen);
        const bool fast = s_.utf8 == 0 && (!bounded_ || ub <= room);
        for (int32_t id : trie.order) {
            const std::string& b = tok.token_bytes(id);
            if (fast && g_->vocab->raw_plain[size_t(id)] &&
                !(s_.k > 0 && uint8_t(b[0]) == kTerm[s_.k]) && s_.bytes + b.size() > 4) {
                if (size_t(id) < mask.size() &&
                    uint64_t(s_.cps) + trie.id_chars[size_t(id)] <= p.max_len)
                    mask[size_t(id)] = 1;
                continue;
            }
            try_token(id);
        }
    }

    void accept(int32_t id) override {
        --left_;
        const bool end = std::find(g_->end_ids.begin(), g_->end_ids.end(), id) != g_->end_ids.end();
        if (end) {
            require(s_.mode == State::Mode::End || s_.end_ok, "tool-call constraint: end token ",
                    id, " before the call is complete");
            s_ = State{};
            s_.mode = State::Mode::End;
            s_.done = true;
            return;
        }
        const Tokenizer& tok = g_->trie->tokenizer;
        require(id >= 0 && id < tok.vocab_size(), "tool-call constraint: token ", id,
                " is not text");
        const std::string* bytes = &tok.token_bytes(id);
        if (tok.is_added(id)) {
            bytes = nullptr;
            if (s_.mode == State::Mode::Lit)
                for (const auto& [aid, content] : g_->added)
                    if (aid == id) bytes = &content;
            require(bytes != nullptr, "tool-call constraint: token ", id, " is not text here");
        }
        State t = s_;
        require(feed(t, *bytes), "tool-call constraint: token ", id, " does not continue the call");
        s_ = std::move(t);
    }

private:
    const LitSet& set(const State& s) const { return g_->sets[size_t(s.set)]; }

    bool lit_valid(const State& s, const Lit& l) const {
        switch (l.act) {
        case Act::Param:
            return !(s.seen >> l.arg & 1);
        case Act::Close:
            return (s.seen & g_->fns[size_t(s.fn)].required) == g_->fns[size_t(s.fn)].required;
        default:
            return true;
        }
    }

    void start_lit(State& s, int set_index, bool end_ok) const {
        s.mode = State::Mode::Lit;
        s.set = set_index;
        s.lo = 0;
        s.hi = uint32_t(g_->sets[size_t(set_index)].size());
        s.pos = 0;
        s.end_ok = end_ok;
    }

    void start_param(State& s, int j) const {
        const Param& p = g_->fns[size_t(s.fn)].params[size_t(j)];
        s.param = j;
        s.seen |= uint64_t(1) << j;
        s.end_ok = false;
        switch (p.mode) {
        case Param::Mode::Raw:
            s.mode = State::Mode::Raw;
            s.cps = s.bytes = 0;
            s.utf8 = s.k = 0;
            s.wlen = 0;
            break;
        case Param::Mode::Enum:
            start_lit(s, p.enum_set, false);
            break;
        case Param::Mode::Json:
            s.mode = State::Mode::Json;
            s.jm = std::make_shared<json::Matcher>(p.grammar);
            break;
        }
    }

    void complete(State& s, const Lit& l) const {
        switch (l.act) {
        case Act::Function:
            s.fn = l.arg;
            s.seen = 0;
            start_lit(s, g_->fns[size_t(l.arg)].choice_set, false);
            return;
        case Act::Param:
            start_param(s, l.arg);
            return;
        case Act::ParamDone:
            s.jm.reset();
            start_lit(s, g_->fns[size_t(s.fn)].choice_set, false);
            return;
        case Act::Close:
            if (g_->parallel) {
                start_lit(s, g_->open_next, true);
            } else {
                s.mode = State::Mode::End;
            }
            return;
        }
    }

    bool lit_byte(State& s, uint8_t c) const {
        const LitSet& ls = set(s);
        uint32_t lo = s.lo, hi = s.hi;
        json::detail::narrow([&](uint32_t i) -> const std::string& { return ls[i].text; }, lo, hi,
                             s.pos, c);
        bool any = false;
        for (uint32_t i = lo; i < hi && !any; ++i) any = lit_valid(s, ls[i]);
        if (!any) return false;
        s.lo = lo, s.hi = hi;
        ++s.pos;
        s.end_ok = false;
        for (uint32_t i = lo; i < hi; ++i)
            if (ls[i].text.size() == s.pos && lit_valid(s, ls[i])) {
                complete(s, ls[i]);
                break;
            }
        return true;
    }

    bool raw_value_ok(const State& s, uint32_t tentative) const {
        const Param& p = g_->fns[size_t(s.fn)].params[size_t(s.param)];
        const uint32_t cps = s.cps - tentative, bytes = s.bytes - tentative;
        if (cps < p.min_len || cps > p.max_len) return false;
        if (bytes == 4) {
            std::string h(s.head, 4);
            for (auto& ch : h) ch = char(std::tolower(uint8_t(ch)));
            if (h == "null") return false;
        }
        return true;
    }

    bool raw_byte(State& s, uint8_t c) const {
        if (c == 0) return false;
        const uint8_t u = utf8_step(s.utf8, c);
        if (u == kUtf8Invalid) return false;
        s.utf8 = u;
        s.k = c == uint8_t(kTerm[s.k]) ? uint8_t(s.k + 1) : uint8_t(c == '\n' ? 1 : 0);
        if ((c & 0xC0) != 0x80) ++s.cps;
        if (s.bytes < 5) s.head[s.bytes] = char(c);
        ++s.bytes;
        if (s.wlen == sizeof s.window) {
            std::memmove(s.window, s.window + 1, sizeof s.window - 1);
            --s.wlen;
        }
        s.window[s.wlen++] = char(c);
        const Param& p = g_->fns[size_t(s.fn)].params[size_t(s.param)];
        if (s.cps - s.k > p.max_len) return false;
        if (s.k == kTermDecided) {
            if (!raw_value_ok(s, kTermDecided)) return false;
            start_lit(s, g_->term, false);
            s.pos = uint32_t(kTermDecided);
            return true;
        }
        const std::string_view w(s.window, s.wlen);
        for (std::string_view b : kBanned)
            if (w.size() >= b.size() && w.substr(w.size() - b.size()) == b) return false;
        return true;
    }

    bool json_byte(State& s, uint8_t c) const {
        if (c == '\n') {
            if (!s.jm->can_end()) return false;
            s.jm.reset();
            start_lit(s, g_->term, false);
            return lit_byte(s, c);
        }
        if (s.jm.use_count() > 1) s.jm = std::make_shared<json::Matcher>(*s.jm);
        return s.jm->advance(c);
    }

    bool feed(State& s, std::string_view bytes) const {
        for (char ch : bytes) {
            const uint8_t c = uint8_t(ch);
            bool ok = false;
            switch (s.mode) {
            case State::Mode::Lit:
                ok = lit_byte(s, c);
                break;
            case State::Mode::Raw:
                ok = raw_byte(s, c);
                break;
            case State::Mode::Json:
                ok = json_byte(s, c);
                break;
            case State::Mode::End:
                ok = false;
                break;
            }
            if (!ok) return false;
        }
        return true;
    }

    // Fewest tokens that complete the output from `s` (an upper bound: JSON closings count a
    // token a byte).
    int cost(const State& s) const {
        switch (s.mode) {
        case State::Mode::End:
            return s.done ? 0 : 1;
        case State::Mode::Lit: {
            const LitSet& ls = set(s);
            int best = s.end_ok ? 1 : kInf;
            for (uint32_t i = s.lo; i < s.hi; ++i) {
                const Lit& l = ls[i];
                if (!lit_valid(s, l)) continue;
                int c = l.cost[s.pos];
                switch (l.act) {
                case Act::Function:
                    c += g_->finish_cost(l.arg, 0);
                    break;
                case Act::Param:
                    c += g_->fns[size_t(s.fn)].params[size_t(l.arg)].min_cost +
                         g_->finish_cost(s.fn, s.seen | uint64_t(1) << l.arg);
                    break;
                case Act::ParamDone:
                    c += g_->finish_cost(s.fn, s.seen);
                    break;
                case Act::Close:
                    c += 1;
                    break;
                }
                best = std::min(best, c);
            }
            return best;
        }
        case State::Mode::Raw: {
            const Param& p = g_->fns[size_t(s.fn)].params[size_t(s.param)];
            const auto& term = g_->sets[size_t(g_->term)][0].cost;
            int c = kInf;
            if (s.utf8 != 0) { // the continuation bytes of the code point first
                const int rem = s.utf8 == 1 ? 1 : s.utf8 <= 4 ? 2 : 3;
                c = rem + (s.cps < p.min_len ? int(p.min_len - s.cps) : 0) + term[0];
            } else {
                if (raw_value_ok(s, 0)) c = term[0];
                if (s.k > 0 && raw_value_ok(s, s.k)) c = std::min(c, term[s.k]);
                if (c == kInf) c = (s.cps < p.min_len ? int(p.min_len - s.cps) : 1) + term[0];
            }
            return c + g_->finish_cost(s.fn, s.seen);
        }
        case State::Mode::Json: {
            const auto close = greedy_close(*s.jm);
            if (!close) return kInf;
            return int(close->size()) + g_->sets[size_t(g_->term)][0].cost[0] +
                   g_->finish_cost(s.fn, s.seen);
        }
        }
        return kInf;
    }

    // Inside a JSON value: the grammar's tokens (and those that end the value and go on into
    // the terminator) while there is room; then only the greedy closing.
    void json_mask(std::vector<uint8_t>& mask, int room) {
        const TokenTrie& trie = *g_->trie;
        const Tokenizer& tok = trie.tokenizer;
        const auto close = greedy_close(*s_.jm);
        const int rest = g_->sets[size_t(g_->term)][0].cost[0] + g_->finish_cost(s_.fn, s_.seen);
        const bool closing = bounded_ && close && int(close->size()) + rest + kJsonMargin > room;
        if (closing) {
            const std::string path = *close + std::string(kTerm);
            for (int32_t id : trie.order) {
                const std::string& b = tok.token_bytes(id);
                if (size_t(id) < mask.size() && b.size() <= path.size() &&
                    path.compare(0, b.size(), b) == 0)
                    mask[size_t(id)] = 1;
            }
            return;
        }
        s_.jm->fill_mask(trie, mask.data(), mask.size());
        if (!s_.jm->can_end()) return;
        for (int32_t id : g_->vocab->with_newline) { // the value ends at the newline
            const std::string& b = tok.token_bytes(id);
            if (size_t(id) >= mask.size()) continue;
            // from the newline on, the token must spell the terminator (or begin it)
            const std::string_view from = std::string_view(b).substr(b.find('\n'));
            const size_t n = std::min(from.size(), kTerm.size());
            if (from.substr(0, n) != kTerm.substr(0, n)) continue;
            State t = s_;
            if (!feed(t, b)) continue;
            if (bounded_ && cost(t) > room) continue;
            mask[size_t(id)] = 1;
        }
    }

    std::shared_ptr<const Grammar> g_;
    int left_;     // tokens left
    bool bounded_; // whether the length is enforced
    State s_;
};

// The parameter's value rules (see the header).
Param make_param(const std::string& name, const OJson& root, const OJson& raw_schema, bool required,
                 Grammar& g, const std::string& where) {
    Param p;
    p.name = name;
    p.required = required;
    const OJson schema = detail::resolve_ref(root, raw_schema);
    const std::string type = detail::parser_type(schema);
    const auto term_cost = spell_costs(*g.trie, g.added, kTerm);
    if (detail::parser_keeps_text(type)) {
        std::vector<OJson> members;
        if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array())
            for (const auto& m : schema["enum"]) members.push_back(m);
        if (schema.is_object() && schema.contains("const")) members.push_back(schema["const"]);
        if (schema.is_object() && (schema.contains("enum") || schema.contains("const"))) {
            LitSet s;
            for (const auto& m : members) {
                std::string text = m.is_string() ? m.get<std::string>() : m.dump();
                std::string low = text;
                for (auto& ch : low) ch = char(std::tolower(uint8_t(ch)));
                if (low == "null" || m.is_null()) continue;
                bool banned = false;
                for (std::string_view b : kBanned) banned |= text.find(b) != std::string::npos;
                if (banned) continue;
                // a member the parser would read back as another value
                if (!m.is_string() && detail::typed_value(text, schema) != m) continue;
                s.push_back({text + std::string(kTerm), Act::ParamDone, 0, {}});
            }
            std::sort(s.begin(), s.end(),
                      [](const Lit& a, const Lit& b) { return a.text < b.text; });
            s.erase(std::unique(s.begin(), s.end(),
                                [](const Lit& a, const Lit& b) { return a.text == b.text; }),
                    s.end());
            if (s.empty())
                fail_invalid(where, ": no value of parameter '", name,
                             "' can be written as a tool-call argument");
            p.mode = Param::Mode::Enum;
            p.enum_set = g.add_set(std::move(s));
            p.min_cost = kInf;
            for (const Lit& l : g.sets[size_t(p.enum_set)])
                p.min_cost = std::min(p.min_cost, l.cost[0]);
            return p;
        }
        p.mode = Param::Mode::Raw;
        if (schema.is_object()) {
            if (schema.contains("minLength") && schema["minLength"].is_number_unsigned())
                p.min_len =
                    uint32_t(std::min<uint64_t>(schema["minLength"].get<uint64_t>(), 1u << 20));
            if (schema.contains("maxLength") && schema["maxLength"].is_number_unsigned())
                p.max_len =
                    uint32_t(std::min<uint64_t>(schema["maxLength"].get<uint64_t>(), UINT32_MAX));
            if (p.min_len > p.max_len)
                fail_invalid(where, ": parameter '", name, "' has minLength > maxLength");
        }
        p.min_cost = int(std::max<uint32_t>(p.min_len, 0)) + term_cost[0];
        return p;
    }
    // JSON text: compile the schema with the root's definitions available to its $refs.
    nlohmann::json doc = nlohmann::json::parse(schema.dump());
    if (doc.is_object())
        for (const char* defs : {"$defs", "definitions"})
            if (root.contains(defs) && !doc.contains(defs))
                doc[defs] = nlohmann::json::parse(root[defs].dump());
    try {
        p.grammar = json::Grammar::compile(doc);
    } catch (const Error& e) {
        fail_invalid(where, ": parameter '", name, "': ", e.what());
    }
    p.mode = Param::Mode::Json;
    const auto close = greedy_close(json::Matcher(p.grammar));
    if (!close) fail_invalid(where, ": parameter '", name, "' has no short JSON value");
    p.min_cost = int(close->size()) + term_cost[0];
    return p;
}

bool writable_name(const std::string& n) {
    return !n.empty() && n.find_first_of(">\n") == std::string::npos &&
           n.find('<') == std::string::npos;
}

} // namespace

namespace {

std::shared_ptr<ToolCallConstraint> build(const OJson& tools, const Tokenizer& tok,
                                          std::vector<int32_t> end_ids,
                                          const ToolCallConstraintOptions& opt) {
    require(!end_ids.empty(), "tool-call constraint: no end ids");
    require(tools.is_array() && !tools.empty(), "tool-call constraint: no tools");
    auto g = std::make_shared<Grammar>();
    g->trie = TokenTrie::get(tok);
    for (const auto& a : tok.added_tokens())
        if (!a.special && !a.content.empty()) g->added.push_back({a.id, a.content});
    g->vocab = vocab_info(g->trie);
    g->end_ids = std::move(end_ids);
    g->parallel = opt.parallel;
    LitSet first, next;
    for (const auto& t : tools) {
        const OJson& f = t.contains("function") ? t["function"] : t;
        Function fn;
        fn.name = f.value("name", "");
        const std::string where = "tool '" + fn.name + "'";
        if (!writable_name(fn.name))
            fail_invalid("tools: the name '", fn.name, "' cannot be written in a tool call");
        OJson params =
            f.contains("parameters") ? f["parameters"] : f.value("input_schema", OJson());
        if (!params.is_object()) params = OJson::object();
        std::vector<std::string> required;
        if (params.contains("required") && params["required"].is_array())
            for (const auto& r : params["required"])
                if (r.is_string()) required.push_back(r.get<std::string>());
        LitSet choice;
        if (params.contains("properties") && params["properties"].is_object()) {
            for (const auto& [name, schema] : params["properties"].items()) {
                const bool req =
                    std::find(required.begin(), required.end(), name) != required.end();
                if (!writable_name(name)) {
                    if (req)
                        fail_invalid(where, ": the parameter name '", name,
                                     "' cannot be written in a tool call");
                    continue;
                }
                if (fn.params.size() == 64) fail_invalid(where, ": more than 64 parameters");
                const int j = int(fn.params.size());
                fn.params.push_back(make_param(name, params, schema, req, *g, where));
                if (req) fn.required |= uint64_t(1) << j;
                choice.push_back({"<parameter=" + name + ">\n", Act::Param, j, {}});
            }
        }
        for (const auto& r : required) {
            bool declared = false;
            for (const auto& p : fn.params) declared |= p.name == r;
            if (!declared)
                fail_invalid(where, ": required parameter '", r, "' is not in its properties");
        }
        choice.push_back({"</function>\n</tool_call>", Act::Close, 0, {}});
        fn.choice_set = g->add_set(std::move(choice));
        const int i = int(g->fns.size());
        first.push_back(
            {opt.lead + "<tool_call>\n<function=" + fn.name + ">\n", Act::Function, i, {}});
        next.push_back({"\n<tool_call>\n<function=" + fn.name + ">\n", Act::Function, i, {}});
        g->fns.push_back(std::move(fn));
    }
    g->open_first = g->add_set(std::move(first));
    g->open_next = g->add_set(std::move(next));
    g->term = g->add_set({{std::string(kTerm), Act::ParamDone, 0, {}}});
    return std::make_shared<ToolCallConstraint>(std::move(g), opt.max_tokens);
}

} // namespace

std::shared_ptr<TokenConstraint> make_tool_call_constraint(const OJson& tools, const Tokenizer& tok,
                                                           std::vector<int32_t> end_ids,
                                                           const ToolCallConstraintOptions& opt) {
    return build(tools, tok, std::move(end_ids), opt);
}

int min_tool_call_tokens(const OJson& tools, const Tokenizer& tok, std::vector<int32_t> end_ids,
                         const ToolCallConstraintOptions& opt) {
    ToolCallConstraintOptions o = opt;
    o.max_tokens = 0;
    return build(tools, tok, std::move(end_ids), o)->min_tokens();
}

} // namespace ninfer::text
