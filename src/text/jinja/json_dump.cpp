// Python json.dumps over jinja Values (the tojson filter of HF chat templates).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "text/jinja/value.h"
#include "text/unicode.h"

namespace ninfer::text::jinja {
namespace {

void escape_string(std::string& out, const std::string& s, bool ascii) {
    out += '"';
    for (char32_t c : to_code_points(s)) {
        char buf[16];
        switch (c) {
        case '"':
            out += "\\\"";
            continue;
        case '\\':
            out += "\\\\";
            continue;
        case '\n':
            out += "\\n";
            continue;
        case '\r':
            out += "\\r";
            continue;
        case '\t':
            out += "\\t";
            continue;
        case '\b':
            out += "\\b";
            continue;
        case '\f':
            out += "\\f";
            continue;
        default:
            break;
        }
        if (c < 0x20 || (ascii && c > 0x7E)) {
            if (c >= 0x10000) {
                const char32_t v = c - 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 | (v >> 10)),
                              unsigned(0xDC00 | (v & 0x3FF)));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
            }
            out += buf;
        } else {
            append_utf8(out, c);
        }
    }
    out += '"';
}

void dump(std::string& out, const Value& v, const JsonOptions& o, int depth) {
    require(depth < 512, "tojson: nesting too deep");
    check_size(out.size());
    const auto newline = [&](int level) {
        if (o.indent < 0) return;
        out += '\n';
        for (int i = 0; i < level; ++i) out += o.indent_text;
    };
    switch (v.kind()) {
    case Value::Kind::None:
        out += "null";
        return;
    case Value::Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
    case Value::Kind::Int:
        out += std::to_string(v.as_int());
        return;
    case Value::Kind::Float: {
        const double f = v.as_float();
        out += std::isnan(f)   ? "NaN"
               : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity")
                               : float_repr(f);
        return;
    }
    case Value::Kind::String:
        escape_string(out, v.as_string(), o.ensure_ascii);
        return;
    case Value::Kind::Array: {
        const List& l = v.as_list();
        if (l.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < l.size(); ++i) {
            if (i) out += o.item_sep;
            newline(depth + 1);
            dump(out, l[i], o, depth + 1);
        }
        newline(depth);
        out += ']';
        return;
    }
    case Value::Kind::Object: {
        require(!v.is_namespace(), "tojson: a namespace is not JSON serializable");
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.as_dict().items) items.push_back(&kv);
        if (o.sort_keys)
            std::stable_sort(items.begin(), items.end(),
                             [](auto* a, auto* b) { return a->first < b->first; });
        if (items.empty()) {
            out += "{}";
            return;
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += o.item_sep;
            newline(depth + 1);
            escape_string(out, items[i]->first, o.ensure_ascii);
            out += o.key_sep;
            dump(out, items[i]->second, o, depth + 1);
        }
        newline(depth);
        out += '}';
        return;
    }
    default:
        fail_invalid("tojson: object of type ", v.repr(), " is not JSON serializable");
    }
}

} // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
    std::string out;
    dump(out, v, options, 0);
    return out;
}

} // namespace ninfer::text::jinja
