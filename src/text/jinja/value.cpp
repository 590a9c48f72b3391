#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utf8proc.h>

#include "core/error.h"
#include "text/unicode.h"

namespace ninfer::text::jinja {

Value Value::undefined(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}
Value::Value(bool b) : kind_(Kind::Bool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double f) : kind_(Kind::Float), f_(f) {}
Value::Value(std::string s) : kind_(Kind::String), s_(std::move(s)) {}
Value Value::list(List items) {
    Value v;
    v.kind_ = Kind::Array;
    v.list_ = std::make_shared<List>(std::move(items));
    return v;
}
Value Value::tuple(List items) {
    Value v = list(std::move(items));
    v.b_ = true;
    return v;
}
Value Value::dict() {
    Value v;
    v.kind_ = Kind::Object;
    v.dict_ = std::make_shared<Dict>();
    return v;
}
Value Value::namespace_object() {
    Value v = dict();
    v.dict_->is_namespace = true;
    return v;
}
Value Value::function(std::string name, Function fn) {
    Value v;
    v.kind_ = Kind::Callable;
    v.s_ = std::move(name);
    v.fn_ = std::make_shared<Function>(std::move(fn));
    return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
        return none();
    case nlohmann::ordered_json::value_t::boolean:
        return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
        return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const uint64_t u = j.get<uint64_t>();
        if (u > uint64_t(INT64_MAX)) return Value(double(u));
        return Value(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
        return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
        return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
        List items;
        for (const auto& x : j) items.push_back(from_json(x));
        return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
        Value d = dict();
        for (const auto& [k, x] : j.items()) d.as_dict().set(k, from_json(x));
        return d;
    }
    default:
        fail_invalid("template context: unsupported JSON value");
    }
}

bool Value::is_namespace() const {
    return kind_ == Kind::Object && dict_->is_namespace;
}

int64_t Value::as_int() const {
    if (kind_ != Kind::Float) return i_;
    // 2^63 is exactly representable; anything at or beyond it (or NaN) has no int64 value.
    if (!(std::fabs(f_) < 9223372036854775808.0))
        fail_invalid("float ", float_repr(f_), " has no integer value");
    return int64_t(f_);
}
double Value::as_float() const {
    return kind_ == Kind::Float ? f_ : double(i_);
}

bool Value::truthy() const {
    switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
        return false;
    case Kind::Bool:
        return b_;
    case Kind::Int:
        return i_ != 0;
    case Kind::Float:
        return f_ != 0.0;
    case Kind::String:
        return !s_.empty();
    case Kind::Array:
        return !list_->empty();
    case Kind::Object:
        return dict_->is_namespace || !dict_->items.empty();
    case Kind::Callable:
        return true;
    }
    return false;
}

const Value* Dict::find(const std::string& key) const {
    auto it = index.find(key);
    return it == index.end() ? nullptr : &items[it->second].second;
}

void Dict::set(const std::string& key, Value v) {
    auto it = index.find(key);
    if (it != index.end()) {
        items[it->second].second = std::move(v);
        return;
    }
    index.emplace(key, items.size());
    items.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t pos, const char* name) const {
    for (const auto& [k, v] : kwargs)
        if (k == name) return v;
    return pos < args.size() ? args[pos] : Value::undefined(name);
}

Value CallArgs::get(size_t pos, const char* name, Value fallback) const {
    Value v = get(pos, name);
    return v.is_undefined() ? fallback : v;
}

void check_size(size_t n) {
    if (n > kMaxValueSize)
        fail_invalid("value too large (over ", kMaxValueSize, " bytes or items)");
}

std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    const size_t e_pos = sci.find('e');
    const int exp = std::stoi(sci.substr(e_pos + 1));
    const bool negative = sci[0] == '-';
    std::string digits;
    for (size_t i = 0; i < e_pos; ++i)
        if (sci[i] != '-' && sci[i] != '.') digits.push_back(sci[i]);
    const std::string sign(negative ? 1 : 0, '-');
    if (exp >= -4 && exp < 16) {
        std::string out = sign;
        if (exp < 0) {
            out.append("0.");
            out.append(size_t(-exp - 1), '0');
            out.append(digits);
        } else {
            const size_t whole = size_t(exp) + 1;
            if (digits.size() < whole) digits.append(whole - digits.size(), '0');
            out.append(digits, 0, whole);
            out.push_back('.');
            if (digits.size() > whole)
                out.append(digits, whole, std::string::npos);
            else
                out.push_back('0');
        }
        return out;
    }
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) {
        mant.push_back('.');
        mant.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + mant + ebuf;
}

namespace {

bool py_printable(char32_t c) {
    if (c == ' ') return true;
    switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
        return false;
    default:
        return true;
    }
}

std::string string_repr(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (char32_t c : to_code_points(s)) {
        char buf[16];
        if (c == char32_t(q) || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (py_printable(c))
            append_utf8(out, c);
        else {
            if (c < 0x100)
                std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
            else if (c < 0x10000)
                std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
            else
                std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
            out += buf;
        }
    }
    return out + q;
}

} // namespace

std::string Value::str() const {
    switch (kind_) {
    case Kind::Undefined:
        return "";
    case Kind::String:
        return s_;
    default:
        return repr();
    }
}

std::string Value::repr() const {
    switch (kind_) {
    case Kind::Undefined:
        return "Undefined";
    case Kind::None:
        return "None";
    case Kind::Bool:
        return b_ ? "True" : "False";
    case Kind::Int:
        return std::to_string(i_);
    case Kind::Float:
        return float_repr(f_);
    case Kind::String:
        return string_repr(s_);
    case Kind::Array: {
        std::string out = b_ ? "(" : "[";
        for (size_t i = 0; i < list_->size(); ++i) {
            out += (i ? ", " : "") + (*list_)[i].repr();
            check_size(out.size());
        }
        if (b_ && list_->size() == 1) out += ",";
        return out + (b_ ? ")" : "]");
    }
    case Kind::Object: {
        if (dict_->is_namespace) return "<Namespace>";
        std::string out = "{";
        for (size_t i = 0; i < dict_->items.size(); ++i) {
            out += (i ? ", " : "") + string_repr(dict_->items[i].first) + ": " +
                   dict_->items[i].second.repr();
            check_size(out.size());
        }
        return out + "}";
    }
    case Kind::Callable:
        return "<function " + s_ + ">";
    }
    return "";
}

int64_t Value::length() const {
    switch (kind_) {
    case Kind::Undefined:
        return 0;
    case Kind::String:
        return int64_t(to_code_points(s_).size());
    case Kind::Array:
        return int64_t(list_->size());
    case Kind::Object:
        return int64_t(dict_->items.size());
    default:
        fail_invalid("object of type '", repr(), "' has no len()");
    }
}

List Value::iterate() const {
    switch (kind_) {
    case Kind::Undefined:
        return {};
    case Kind::Array:
        return *list_;
    case Kind::Object: {
        List keys;
        for (const auto& [k, v] : dict_->items) keys.emplace_back(k);
        return keys;
    }
    case Kind::String: {
        List chars;
        for (char32_t c : to_code_points(s_)) {
            std::string one;
            append_utf8(one, c);
            chars.emplace_back(std::move(one));
        }
        return chars;
    }
    default:
        fail_invalid("'", repr(), "' is not iterable");
    }
}

bool Value::same_object(const Value& o) const {
    if (kind_ != o.kind_) return false;
    switch (kind_) {
    case Kind::Array:
        return list_ == o.list_;
    case Kind::Object:
        return dict_ == o.dict_;
    case Kind::Callable:
        return fn_ == o.fn_;
    default:
        return equals(*this, o);
    }
}

bool equals(const Value& a, const Value& b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.kind() == K::Float || b.kind() == K::Float) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case K::Undefined:
    case K::None:
        return true;
    case K::String:
        return a.as_string() == b.as_string();
    case K::Array: {
        if (&a.as_list() == &b.as_list()) return true;
        if (a.as_list().size() != b.as_list().size()) return false;
        for (size_t i = 0; i < a.as_list().size(); ++i)
            if (!equals(a.as_list()[i], b.as_list()[i])) return false;
        return true;
    }
    case K::Object: {
        if (a.as_dict().items.size() != b.as_dict().items.size()) return false;
        for (const auto& [k, v] : a.as_dict().items) {
            const Value* o = b.as_dict().find(k);
            if (!o || !equals(v, *o)) return false;
        }
        return true;
    }
    default:
        return a.same_object(b);
    }
}

int compare(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float)
            return a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
        return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    if (a.is_string() && b.is_string())
        return a.as_string().compare(b.as_string()) < 0 ? -1
               : a.as_string() == b.as_string()         ? 0
                                                        : 1;
    if (a.is_list() && b.is_list()) {
        const List &x = a.as_list(), &y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (!equals(x[i], y[i])) return compare(x[i], y[i]);
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    fail_invalid("ordering not supported between ", a.repr(), " and ", b.repr());
}

} // namespace ninfer::text::jinja
