#include "text/jinja/methods.h"

#include <algorithm>
#include <optional>
#include <utf8proc.h>

#include "core/error.h"
#include "text/unicode.h"

namespace ninfer::text::jinja::detail {
namespace {

std::string need_str(const Value& v, const char* what) {
    if (!v.is_string()) fail_invalid(what, " argument must be str, not ", v.repr());
    return v.as_string();
}

int64_t cp_index(const std::string& s, size_t byte) {
    return int64_t(to_code_points(std::string_view(s).substr(0, byte)).size());
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count) {
    std::string out;
    if (old.empty()) { // inserted before every code point and at the end
        int64_t done = 0;
        for (char32_t c : to_code_points(s)) {
            if (count < 0 || done < count) out += repl, ++done;
            append_utf8(out, c);
            check_size(out.size());
        }
        if (count < 0 || done < count) out += repl;
        return out;
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const size_t f = s.find(old, pos);
        if (f == std::string::npos) break;
        out.append(s, pos, f - pos);
        out += repl;
        check_size(out.size());
        pos = f + old.size();
        ++done;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

bool affix_match(const std::string& s, const Value& arg, bool prefix) {
    const auto one = [&](const Value& a) {
        const std::string x = need_str(a, prefix ? "startswith" : "endswith");
        if (x.size() > s.size()) return false;
        return prefix ? s.compare(0, x.size(), x) == 0
                      : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (arg.is_list()) {
        for (const Value& a : arg.as_list())
            if (one(a)) return true;
        return false;
    }
    return one(arg);
}

template <typename Pred> bool all_chars(const std::string& s, Pred p) {
    const auto cps = to_code_points(s);
    return !cps.empty() && std::all_of(cps.begin(), cps.end(), p);
}

bool is_category(char32_t c, std::initializer_list<utf8proc_category_t> cats) {
    const auto cat = utf8proc_category(utf8proc_int32_t(c));
    return std::find(cats.begin(), cats.end(), cat) != cats.end();
}

// strip, split, startswith/endswith, case changes, replace.
std::optional<Value> shape_method(const std::string& s, const std::string& name, CallArgs& a) {
    const auto strip_chars = [&](bool l, bool r) {
        const Value c = a.get(0, "chars");
        if (c.is_undefined() || c.is_none()) return Value(py_strip(s, l, r, nullptr));
        const std::string chars = need_str(c, "strip");
        return Value(py_strip(s, l, r, &chars));
    };
    if (name == "strip") return strip_chars(true, true);
    if (name == "lstrip") return strip_chars(true, false);
    if (name == "rstrip") return strip_chars(false, true);
    if (name == "split" || name == "rsplit")
        return Value::list(py_split(s, a.get(0, "sep"),
                                    a.get(1, "maxsplit", Value(int64_t(-1))).as_int(),
                                    name == "rsplit"));
    if (name == "startswith") return Value(affix_match(s, a.get(0, "prefix"), true));
    if (name == "endswith") return Value(affix_match(s, a.get(0, "suffix"), false));
    if (name == "upper") return Value(py_upper(s));
    if (name == "lower") return Value(py_lower(s));
    if (name == "title") return Value(py_title(s));
    if (name == "capitalize") return Value(py_capitalize(s));
    if (name == "replace")
        return Value(py_replace(s, need_str(a.get(0, "old"), "replace"),
                                need_str(a.get(1, "new"), "replace"),
                                a.get(2, "count", Value(int64_t(-1))).as_int()));
    return std::nullopt;
}

// find/index, count, join, splitlines and the is* tests.
Value search_method(const std::string& s, const std::string& name, CallArgs& a) {
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        const std::string sub = need_str(a.get(0, "sub"), name.c_str());
        const size_t f = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
        if (f == std::string::npos) {
            if (name.find("index") != std::string::npos) fail_invalid("substring not found");
            return Value(int64_t(-1));
        }
        return Value(cp_index(s, f));
    }
    if (name == "count") {
        const std::string sub = need_str(a.get(0, "sub"), "count");
        if (sub.empty()) return Value(int64_t(to_code_points(s).size()) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value(n);
    }
    if (name == "join") {
        std::string out;
        bool first = true;
        for (const Value& v : a.get(0, "iterable").iterate()) {
            if (!first) out += s;
            out += need_str(v, "join");
            check_size(out.size());
            first = false;
        }
        return Value(std::move(out));
    }
    if (name == "splitlines") {
        List lines;
        std::string cur;
        for (char c : s) {
            if (c == '\n')
                lines.emplace_back(cur), cur.clear();
            else
                cur += c;
        }
        if (!cur.empty()) lines.emplace_back(cur);
        return Value::list(std::move(lines));
    }
    if (name == "isspace") return Value(all_chars(s, is_py_space));
    if (name == "isdigit")
        return Value(
            all_chars(s, [](char32_t c) { return is_category(c, {UTF8PROC_CATEGORY_ND}); }));
    if (name == "isalpha")
        return Value(all_chars(s, [](char32_t c) {
            return is_category(c, {UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT,
                                   UTF8PROC_CATEGORY_LM, UTF8PROC_CATEGORY_LO});
        }));
    if (name == "islower") return Value(py_lower(s) == s && py_upper(s) != s);
    if (name == "isupper") return Value(py_upper(s) == s && py_lower(s) != s);
    fail_invalid("str has no method '", name, "'");
}

Value string_method(const std::string& s, const std::string& name, CallArgs& a) {
    if (std::optional<Value> v = shape_method(s, name, a)) return *v;
    return search_method(s, name, a);
}

const char* const kStringMethods[] = {
    "strip", "lstrip", "rstrip",     "split",   "rsplit",  "startswith", "endswith", "upper",
    "lower", "title",  "capitalize", "replace", "find",    "rfind",      "index",    "rindex",
    "count", "join",   "splitlines", "isspace", "isdigit", "isalpha",    "islower",  "isupper"};

Value dict_method(const Value& d, const std::string& name, CallArgs& a) {
    const Dict& dict = d.as_dict();
    if (name == "items" || name == "keys" || name == "values") {
        List out;
        for (const auto& [k, v] : dict.items) {
            if (name == "items")
                out.push_back(Value::tuple({Value(k), v}));
            else
                out.push_back(name == "keys" ? Value(k) : v);
        }
        return Value::list(std::move(out));
    }
    if (name == "get") {
        const Value key = a.get(0, "key");
        const Value* v = key.is_string() ? dict.find(key.as_string()) : nullptr;
        return v ? *v : a.get(1, "default", Value::none());
    }
    fail_invalid("dict has no method '", name, "'");
}

} // namespace

List py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
    List out;
    if (sep.is_undefined() || sep.is_none()) {
        std::vector<char32_t> cps = to_code_points(s);
        if (from_right) std::reverse(cps.begin(), cps.end());
        size_t i = 0;
        int64_t splits = 0;
        while (true) {
            while (i < cps.size() && is_py_space(cps[i])) ++i;
            if (i == cps.size()) break;
            size_t j = i;
            if (maxsplit >= 0 && splits == maxsplit)
                j = cps.size();
            else
                while (j < cps.size() && !is_py_space(cps[j])) ++j;
            std::vector<char32_t> word(cps.begin() + long(i), cps.begin() + long(j));
            if (from_right) {
                std::reverse(word.begin(), word.end());
                if (j ==
                    cps.size()) // the rest keeps its (right) whitespace stripped only at the end
                    word = to_code_points(
                        py_strip(from_code_points(word, 0, word.size()), false, true, nullptr));
            }
            out.emplace_back(from_code_points(word, 0, word.size()));
            ++splits;
            i = j;
        }
        if (from_right) std::reverse(out.begin(), out.end());
        return out;
    }
    const std::string d = need_str(sep, "split");
    require(!d.empty(), "empty separator");
    if (!from_right) {
        size_t pos = 0;
        for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
            const size_t f = s.find(d, pos);
            if (f == std::string::npos) break;
            out.emplace_back(s.substr(pos, f - pos));
            pos = f + d.size();
        }
        out.emplace_back(s.substr(pos));
        return out;
    }
    size_t end = s.size();
    for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
        if (end < d.size()) break;
        const size_t f = s.rfind(d, end - d.size());
        if (f == std::string::npos) break;
        out.emplace_back(s.substr(f + d.size(), end - f - d.size()));
        end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
}

Value bound_method(const Value& obj, const std::string& name) {
    if (obj.is_string()) {
        for (const char* m : kStringMethods)
            if (name == m)
                return Value::function(name, [s = obj.as_string(), name](CallArgs& a) {
                    return string_method(s, name, a);
                });
    } else if (obj.is_dict() && !obj.is_namespace()) {
        if (name == "items" || name == "keys" || name == "values" || name == "get")
            return Value::function(name,
                                   [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
    } else if (obj.is_list()) {
        if (name == "index" || name == "count")
            return Value::function(name, [obj, name](CallArgs& a) {
                const Value x = a.get(0, "value");
                int64_t n = 0;
                for (size_t i = 0; i < obj.as_list().size(); ++i)
                    if (equals(obj.as_list()[i], x)) {
                        if (name == "index") return Value(int64_t(i));
                        ++n;
                    }
                if (name == "index") fail_invalid(x.repr(), " is not in list");
                return Value(n);
            });
    }
    return Value::undefined(name);
}

} // namespace ninfer::text::jinja::detail
