// json::Grammar: compilation driver, derived node data (flattened unions, first bytes, the
// frames a value needs) and the validator of compiled schemas.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "text/json_schema.h"

namespace ninfer::text::json {
namespace {

// Replaces each union's alternatives by the non-union nodes it reaches, its literals merged
// into one node (so that an enum-like anyOf is one matcher thread, not one per value).
void flatten(Grammar& g) {
    const size_t count = g.nodes.size();
    for (size_t u = 0; u < count; ++u) {
        if (g.nodes[u].kind != NodeKind::Union) continue;
        std::vector<uint32_t> leaves, literals, stack = g.nodes[u].alts;
        std::set<uint32_t> seen;
        while (!stack.empty()) {
            const uint32_t id = stack.back();
            stack.pop_back();
            if (!seen.insert(id).second) continue;
            const Node& n = g.nodes[id];
            if (n.kind == NodeKind::Union)
                stack.insert(stack.end(), n.alts.rbegin(), n.alts.rend());
            else
                (n.kind == NodeKind::Literal ? literals : leaves).push_back(id);
        }
        if (literals.size() > 1) {
            std::vector<std::pair<std::string, nlohmann::json>> entries;
            for (uint32_t id : literals)
                for (size_t i = 0; i < g.nodes[id].texts.size(); ++i)
                    entries.emplace_back(g.nodes[id].texts[i], g.nodes[id].values[i]);
            std::sort(entries.begin(), entries.end(),
                      [](const auto& x, const auto& y) { return x.first < y.first; });
            Node merged = detail::leaf(NodeKind::Literal);
            for (auto& [text, value] : entries) {
                if (!merged.texts.empty() && merged.texts.back() == text) continue;
                merged.texts.push_back(std::move(text));
                merged.values.push_back(std::move(value));
            }
            g.nodes.push_back(std::move(merged));
            literals = {uint32_t(g.nodes.size() - 1)};
        }
        leaves.insert(leaves.end(), literals.begin(), literals.end());
        g.nodes[u].alts = std::move(leaves);
    }
}

void derive(Grammar& g) {
    for (auto& n : g.nodes) {
        switch (n.kind) {
        case NodeKind::Object:
            n.first.set('{');
            break;
        case NodeKind::Array:
            n.first.set('[');
            break;
        case NodeKind::String:
            n.first.set('"');
            break;
        case NodeKind::Number:
        case NodeKind::Integer:
            n.first.set('-');
            for (int c = '0'; c <= '9'; ++c) n.first.set(size_t(c));
            break;
        case NodeKind::Literal:
            for (const auto& t : n.texts) n.first.set(uint8_t(t[0]));
            break;
        case NodeKind::Union:
            break;
        }
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (auto& n : g.nodes) {
            uint32_t v = kUnsat;
            auto need = [&](uint32_t id) { return id == kNone ? kUnsat : g.nodes[id].need; };
            switch (n.kind) {
            case NodeKind::Object: {
                uint32_t m = 0;
                for (const auto& p : n.props)
                    if (p.required) m = std::max(m, need(p.node));
                v = std::min(kUnsat, 1 + m);
                break;
            }
            case NodeKind::Array: {
                uint32_t m = 0;
                for (uint32_t i = 0; i < n.min_items && m < kUnsat; ++i) {
                    m = std::max(m, need(n.item_at(i)));
                    if (i >= n.prefix.size()) break; // the rest repeat `items`
                }
                v = std::min(kUnsat, 1 + m);
                break;
            }
            case NodeKind::Union:
                for (uint32_t a : n.alts) v = std::min(v, need(a));
                break;
            default:
                v = 1;
            }
            if (v < n.need) n.need = v, changed = true;
        }
    }
}

} // namespace

std::shared_ptr<const Grammar> Grammar::compile(const nlohmann::json& schema,
                                                const Options& options) {
    require(options.max_whitespace >= 0 && options.max_whitespace <= 64,
            "JSON constraint: max_whitespace must be in [0, 64]");
    require(options.max_depth >= 3 && options.max_depth <= 1000,
            "JSON constraint: max_depth must be in [3, 1000]");
    auto g = std::make_shared<Grammar>();
    g->options = options;
    g->whitespace.set(' ');
    if (options.allow_newlines)
        g->whitespace.set('\n'), g->whitespace.set('\r'), g->whitespace.set('\t');
    try {
        g->root = detail::compile_schema(schema, *g);
    } catch (const nlohmann::json::exception& e) {
        fail_invalid("JSON schema: ", e.what());
    }
    flatten(*g);
    derive(*g);
    const uint32_t need = g->nodes[g->root].need;
    require(need < kUnsat, "JSON schema: no finite JSON value satisfies the schema");
    require(need + 1 <= uint32_t(options.max_depth), "JSON schema: its values nest deeper (", need,
            " levels) than the limit of ", options.max_depth - 1);
    return g;
}

void detail::index_keys(Node& n) {
    for (uint32_t i = 0; i < n.props.size(); ++i) {
        n.by_name.push_back(i);
        n.key_texts.push_back(nlohmann::json(n.props[i].name).dump());
    }
    std::sort(n.by_name.begin(), n.by_name.end(),
              [&](uint32_t a, uint32_t b) { return n.props[a].name < n.props[b].name; });
    std::vector<uint32_t> order(n.props.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return n.key_texts[a] < n.key_texts[b]; });
    std::vector<std::string> texts;
    for (uint32_t i : order) texts.push_back(n.key_texts[i]);
    n.key_texts = std::move(texts);
    n.key_prop = std::move(order);
}

Node detail::leaf(NodeKind kind) {
    Node n;
    n.kind = kind;
    return n;
}

std::string detail::percent_decode(const std::string& s) {
    auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
    };
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::string detail::escape_pointer(const std::string& key) {
    std::string out;
    for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
}

size_t utf8_length(const std::string& s) {
    size_t n = 0;
    for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
    return n;
}

namespace {

bool validate_at(const Grammar& g, uint32_t id, const nlohmann::json& v, int depth) {
    if (id == kNone || depth > 2000) return false;
    const Node& n = g.nodes[id];
    switch (n.kind) {
    case NodeKind::Union:
        for (uint32_t a : n.alts)
            if (validate_at(g, a, v, depth + 1)) return true;
        return false;
    case NodeKind::Literal:
        return std::find(n.values.begin(), n.values.end(), v) != n.values.end();
    case NodeKind::String:
        if (!v.is_string()) return false;
        {
            const size_t len = utf8_length(v.get_ref<const std::string&>());
            return len >= n.min_length && len <= n.max_length;
        }
    case NodeKind::Integer: {
        if (!v.is_number()) return false;
        const long double x = v.is_number_float()      ? (long double)v.get<double>()
                              : v.is_number_unsigned() ? (long double)v.get<uint64_t>()
                                                       : (long double)v.get<int64_t>();
        return std::floor(x) == x && x >= n.ilo && x <= n.ihi;
    }
    case NodeKind::Number: {
        if (!v.is_number()) return false;
        const double x = v.get<double>();
        if ((n.has_lo && !(x >= n.lo)) || (n.has_hi && !(x <= n.hi))) return false;
        return std::isfinite(x);
    }
    case NodeKind::Array: {
        if (!v.is_array() || v.size() < n.min_items || v.size() > n.max_items) return false;
        for (size_t i = 0; i < v.size(); ++i)
            if (!validate_at(g, n.item_at(uint32_t(std::min<size_t>(i, 0xFFFFFFF0u))), v[i],
                             depth + 1))
                return false;
        return true;
    }
    case NodeKind::Object: {
        if (!v.is_object()) return false;
        for (const auto& p : n.props)
            if (p.required && !v.contains(p.name)) return false;
        for (auto it = v.begin(); it != v.end(); ++it) {
            const std::string& key = it.key();
            auto p = std::find_if(n.props.begin(), n.props.end(),
                                  [&](const Property& q) { return q.name == key; });
            if (!validate_at(g, p != n.props.end() ? p->node : n.additional, *it, depth + 1))
                return false;
        }
        return true;
    }
    }
    return false;
}

} // namespace

bool Grammar::validate(uint32_t node, const nlohmann::json& value) const {
    return validate_at(*this, node, value, 0);
}

} // namespace ninfer::text::json
