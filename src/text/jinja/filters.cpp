// Filters and tests of jinja2 (plus HF's tojson), with jinja2's argument names and defaults.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/methods.h"
#include "text/unicode.h"

namespace ninfer::text::jinja::detail {
namespace {

// HF transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Value tojson(const Value& v, CallArgs& a) {
    JsonOptions o;
    o.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
    const Value indent = a.get(1, "indent", Value::none());
    if (indent.is_string())
        o.indent = 1, o.indent_text = indent.as_string();
    else if (indent.is_number()) {
        require(indent.as_int() <= 1024, "tojson: indent too large");
        o.indent = 1,
        o.indent_text = std::string(size_t(std::max<int64_t>(0, indent.as_int())), ' ');
    }
    require(o.indent_text.size() <= 1024, "tojson: indent too large");
    if (o.indent >= 0) o.item_sep = ",";
    const Value seps = a.get(2, "separators", Value::none());
    if (seps.is_list() && seps.as_list().size() == 2)
        o.item_sep = seps.as_list()[0].str(), o.key_sep = seps.as_list()[1].str();
    o.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
    return Value(to_json(v, o));
}

Value items(const Value& v) {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) fail_invalid("items: can only get item pairs from a mapping");
    List out;
    for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple({Value(k), x}));
    return Value::list(std::move(out));
}

Value sort_key(const Value& v, bool case_sensitive) {
    return !case_sensitive && v.is_string() ? Value(py_lower(v.as_string())) : v;
}

Value sorted(List l, bool reverse, bool case_sensitive, const Value& attribute) {
    const auto key = [&](const Value& x) {
        return sort_key(attribute.is_undefined() ? x : get_attr(x, attribute.str()),
                        case_sensitive);
    };
    std::stable_sort(l.begin(), l.end(), [&](const Value& a, const Value& b) {
        return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0;
    });
    return Value::list(std::move(l));
}

Value select(const Value& v, CallArgs& a, bool by_attr, bool keep) {
    List out;
    const size_t first = by_attr ? 1 : 0;
    const Value test = a.get(first, "test_name");
    CallArgs targs;
    for (size_t i = first + 1; i < a.args.size(); ++i) targs.args.push_back(a.args[i]);
    for (const Value& x : v.iterate()) {
        const Value subject = by_attr ? get_attr(x, a.get(0, "attribute").str()) : x;
        const bool ok =
            test.is_undefined() ? subject.truthy() : apply_test(test.str(), subject, targs);
        if (ok == keep) out.push_back(x);
    }
    return Value::list(std::move(out));
}

Value map_filter(const Value& v, CallArgs& a) {
    List out;
    const Value attribute = a.get(99, "attribute");
    if (!attribute.is_undefined()) {
        const Value dflt = a.get(99, "default");
        for (const Value& x : v.iterate()) {
            Value y = get_attr(x, attribute.str());
            out.push_back(y.is_undefined() && !dflt.is_undefined() ? dflt : y);
        }
        return Value::list(std::move(out));
    }
    require(!a.args.empty(), "map: needs a filter name or attribute=");
    const std::string filter = a.args[0].str();
    CallArgs fargs;
    fargs.args.assign(a.args.begin() + 1, a.args.end());
    for (const Value& x : v.iterate()) {
        CallArgs copy = fargs;
        out.push_back(apply_filter(filter, x, copy));
    }
    return Value::list(std::move(out));
}

Value to_int(const Value& v, const Value& dflt) {
    if (v.is_number()) return Value(v.as_int());
    if (v.is_string()) {
        const std::string s = py_strip(v.as_string(), true, true, nullptr);
        try {
            size_t used = 0;
            const long long x = std::stoll(s, &used);
            if (used == s.size()) return Value(int64_t(x));
            const double f = std::stod(s, &used);
            if (used == s.size() && std::isfinite(f)) return Value(int64_t(f));
        } catch (const std::exception&) {
        }
    }
    return dflt.is_undefined() ? Value(int64_t(0)) : dflt;
}

Value to_float(const Value& v, const Value& dflt) {
    if (v.is_number()) return Value(v.as_float());
    if (v.is_string()) {
        try {
            size_t used = 0;
            const std::string s = py_strip(v.as_string(), true, true, nullptr);
            const double f = std::stod(s, &used);
            if (used == s.size()) return Value(f);
        } catch (const std::exception&) {
        }
    }
    return dflt.is_undefined() ? Value(0.0) : dflt;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&#34;";
            break;
        case '\'':
            out += "&#39;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

Value first_or_last(const Value& v, bool first) {
    const List l = v.iterate();
    if (l.empty()) return Value::undefined(first ? "first" : "last");
    return first ? l.front() : l.back();
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
    const List l = v.iterate();
    if (l.empty()) return Value::undefined(want_max ? "max" : "min");
    const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(1, "attribute");
    const auto key = [&](const Value& x) {
        return sort_key(attr.is_undefined() ? x : get_attr(x, attr.str()), cs);
    };
    Value best = l[0];
    for (const Value& x : l) {
        const int c = compare(key(x), key(best));
        if (want_max ? c > 0 : c < 0) best = x;
    }
    return best;
}

Value indent(const Value& v, CallArgs& a) {
    const Value w = a.get(0, "width", Value(int64_t(4)));
    require(w.is_string() || (w.is_number() && w.as_int() <= 1024), "indent: width too large");
    const std::string pad =
        w.is_string() ? w.as_string() : std::string(size_t(std::max<int64_t>(0, w.as_int())), ' ');
    const bool first = a.get(1, "first", Value(false)).truthy();
    const bool blank = a.get(2, "blank", Value(false)).truthy();
    const List lines = py_split(v.str(), Value("\n"), -1, false);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& line = lines[i].as_string();
        if (i) out += '\n';
        if ((i > 0 || first) && (blank || !line.empty())) out += pad;
        out += line;
        check_size(out.size());
    }
    return Value(std::move(out));
}

// tojson, trim, items, string, length, default, first/last, join, case and replace.
std::optional<Value> text_filter(const std::string& name, const Value& v, CallArgs& a) {
    if (name == "tojson") return tojson(v, a);
    if (name == "trim") {
        const Value chars = a.get(0, "chars");
        if (chars.is_undefined() || chars.is_none())
            return Value(py_strip(v.str(), true, true, nullptr));
        const std::string c = chars.str();
        return Value(py_strip(v.str(), true, true, &c));
    }
    if (name == "items") return items(v);
    if (name == "string" || name == "safe") return Value(v.str());
    if (name == "length" || name == "count") return Value(v.length());
    if (name == "default" || name == "d") {
        const bool boolean = a.get(1, "boolean", Value(false)).truthy();
        if (v.is_undefined() || (boolean && !v.truthy()))
            return a.get(0, "default_value", Value(""));
        return v;
    }
    if (name == "first" || name == "last") return first_or_last(v, name == "first");
    if (name == "join") {
        const Value attr = a.get(1, "attribute");
        std::string out;
        bool first = true;
        for (const Value& x : v.iterate()) {
            if (!first) out += a.get(0, "d", Value("")).str();
            out += (attr.is_undefined() ? x : get_attr(x, attr.str())).str();
            check_size(out.size());
            first = false;
        }
        return Value(std::move(out));
    }
    if (name == "upper") return Value(py_upper(v.str()));
    if (name == "lower") return Value(py_lower(v.str()));
    if (name == "title") return Value(py_title(v.str()));
    if (name == "capitalize") return Value(py_capitalize(v.str()));
    if (name == "replace") {
        CallArgs m;
        m.args = {a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value(int64_t(-1)))};
        return get_attr(Value(v.str()), "replace").as_function()(m);
    }
    return std::nullopt;
}

// list, map, select/reject(attr), dictsort, sort, reverse, unique, min/max, sum.
std::optional<Value> sequence_filter(const std::string& name, const Value& v, CallArgs& a) {
    if (name == "list") return Value::list(v.iterate());
    if (name == "map") return map_filter(v, a);
    if (name == "select" || name == "reject") return select(v, a, false, name == "select");
    if (name == "selectattr" || name == "rejectattr")
        return select(v, a, true, name == "selectattr");
    if (name == "dictsort") {
        const Value by = a.get(1, "by", Value("key"));
        List pairs = items(v).as_list();
        const size_t k = by.str() == "value" ? 1 : 0;
        const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
        std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
            return compare(sort_key(x.as_list()[k], cs), sort_key(y.as_list()[k], cs)) < 0;
        });
        if (a.get(2, "reverse", Value(false)).truthy()) std::reverse(pairs.begin(), pairs.end());
        return Value::list(std::move(pairs));
    }
    if (name == "sort")
        return sorted(v.iterate(), a.get(0, "reverse", Value(false)).truthy(),
                      a.get(1, "case_sensitive", Value(false)).truthy(), a.get(2, "attribute"));
    if (name == "reverse") {
        if (v.is_string()) return get_slice(v, Value(), Value(), Value(int64_t(-1)));
        List l = v.iterate();
        std::reverse(l.begin(), l.end());
        return Value::list(std::move(l));
    }
    if (name == "unique") {
        List out;
        for (const Value& x : v.iterate())
            if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equals(x, y); }))
                out.push_back(x);
        return Value::list(std::move(out));
    }
    if (name == "min" || name == "max") return min_max(v, a, name == "max");
    if (name == "sum") {
        Value total = a.get(1, "start", Value(int64_t(0)));
        const Value attr = a.get(0, "attribute");
        for (const Value& x : v.iterate())
            total = arithmetic("+", total, attr.is_undefined() ? x : get_attr(x, attr.str()));
        return total;
    }
    return std::nullopt;
}

// int, float, abs, round, indent, escape, attr, wordcount.
std::optional<Value> other_filter(const std::string& name, const Value& v, CallArgs& a) {
    if (name == "int") return to_int(v, a.get(0, "default"));
    if (name == "float") return to_float(v, a.get(0, "default"));
    if (name == "abs")
        return v.kind() == Value::Kind::Float ? Value(std::fabs(v.as_float()))
                                              : arithmetic(v.as_int() < 0 ? "neg" : "pos", v, v);
    if (name == "round") {
        const double p = std::pow(10.0, double(a.get(0, "precision", Value(int64_t(0))).as_int()));
        const std::string method = a.get(1, "method", Value("common")).str();
        const double x = v.as_float() * p;
        const double r = method == "ceil"    ? std::ceil(x)
                         : method == "floor" ? std::floor(x)
                                             : std::nearbyint(x);
        return Value(r / p);
    }
    if (name == "indent") return indent(v, a);
    if (name == "escape" || name == "e" || name == "forceescape")
        return Value(html_escape(v.str()));
    if (name == "attr") return get_attr(v, a.get(0, "name").str());
    if (name == "wordcount") return Value(int64_t(py_split(v.str(), Value(), -1, false).size()));
    return std::nullopt;
}

} // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
    for (auto* group : {text_filter, sequence_filter, other_filter})
        if (std::optional<Value> r = group(name, v, a)) return *r;
    fail_invalid("no filter named '", name, "'");
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
    using K = Value::Kind;
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.kind() == K::Bool;
    if (name == "true") return v.kind() == K::Bool && v.as_bool();
    if (name == "false") return v.kind() == K::Bool && !v.as_bool();
    if (name == "integer") return v.kind() == K::Int;
    if (name == "float") return v.kind() == K::Float;
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict() && !v.is_namespace();
    if (name == "iterable")
        return v.is_undefined() || v.is_string() || v.is_list() ||
               (v.is_dict() && !v.is_namespace());
    if (name == "sequence")
        return v.is_undefined() || v.is_string() || v.is_list() ||
               (v.is_dict() && !v.is_namespace());
    if (name == "callable") return v.kind() == K::Callable;
    if (name == "sameas") return v.same_object(a.get(0, "other"));
    if (name == "escaped") return false;
    if (name == "odd" || name == "even") {
        require(v.is_number() && v.kind() != K::Float, "test ", name, " needs an integer");
        return (v.as_int() % 2 != 0) == (name == "odd");
    }
    if (name == "divisibleby") {
        const Value n = a.get(0, "num");
        require(n.is_number() && n.as_int() != 0, "divisibleby needs a non-zero number");
        return n.as_int() == -1 || v.as_int() % n.as_int() == 0; // INT64_MIN % -1 overflows
    }
    if (name == "lower") return v.is_string() && py_lower(v.as_string()) == v.as_string();
    if (name == "upper") return v.is_string() && py_upper(v.as_string()) == v.as_string();
    if (name == "in") return contains(a.get(0, "seq"), v);
    const Value other = a.get(0, "other");
    if (name == "eq" || name == "equalto" || name == "==") return equals(v, other);
    if (name == "ne" || name == "!=") return !equals(v, other);
    if (name == "lt" || name == "lessthan" || name == "<") return compare(v, other) < 0;
    if (name == "le" || name == "<=") return compare(v, other) <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, other) > 0;
    if (name == "ge" || name == ">=") return compare(v, other) >= 0;
    fail_invalid("no test named '", name, "'");
}

} // namespace ninfer::text::jinja::detail
