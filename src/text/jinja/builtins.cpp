// Attribute/item access, operators and globals of the Jinja interpreter (Python semantics).
#include "text/jinja/builtins.h"

#include <climits>
#include <cmath>
#include <ctime>

#include "core/error.h"
#include "text/jinja/methods.h"
#include "text/unicode.h"

namespace ninfer::text::jinja::detail {

Value get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined())
        fail_invalid("'", obj.name().empty() ? "value" : obj.name(), "' is undefined (reading .",
                     name, ")");
    if (obj.is_namespace()) {
        const Value* v = obj.as_dict().find(name);
        return v ? *v : Value::undefined(name);
    }
    if (Value m = bound_method(obj, name); !m.is_undefined()) return m;
    if (obj.is_dict()) {
        const Value* v = obj.as_dict().find(name);
        return v ? *v : Value::undefined(name);
    }
    return Value::undefined(name);
}

namespace {

// Python index normalisation; false when out of range.
bool normalize_index(int64_t& i, int64_t n) {
    if (i < 0) i += n;
    return i >= 0 && i < n;
}

} // namespace

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined())
        fail_invalid("'", obj.name().empty() ? "value" : obj.name(), "' is undefined (reading [",
                     key.repr(), "])");
    if (obj.is_dict() && key.is_string()) {
        const Value* v = obj.as_dict().find(key.as_string());
        if (v) return *v;
    } else if ((obj.is_list() || obj.is_string()) && key.is_number() &&
               key.kind() != Value::Kind::Float) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
            if (normalize_index(i, int64_t(obj.as_list().size()))) return obj.as_list()[size_t(i)];
        } else {
            const auto cps = to_code_points(obj.as_string());
            if (normalize_index(i, int64_t(cps.size())))
                return Value(from_code_points(cps, size_t(i), size_t(i) + 1));
        }
        return Value::undefined("index");
    }
    if (key.is_string() && !obj.is_namespace()) return get_attr(obj, key.as_string());
    return Value::undefined("item");
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
    if (!obj.is_list() && !obj.is_string()) fail_invalid("cannot slice ", obj.repr());
    const auto as_opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        if (!v.is_number() || v.kind() == Value::Kind::Float)
            fail_invalid("slice ", what, " must be an integer");
        return v.as_int();
    };
    const int64_t step = as_opt(step_v, "step").value_or(1);
    require(step != 0, "slice step cannot be zero");
    std::vector<char32_t> cps;
    const int64_t n = obj.is_list() ? int64_t(obj.as_list().size())
                                    : int64_t((cps = to_code_points(obj.as_string())).size());
    const auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v < 0 ? *v + n : *v;
        if (step > 0) return std::clamp<int64_t>(x, 0, n);
        return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t b = clamp(as_opt(start, "start"), step > 0 ? 0 : n - 1);
    const int64_t e = clamp(as_opt(stop, "stop"), step > 0 ? n : -1);
    List items;
    std::string s;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
        if (obj.is_list())
            items.push_back(obj.as_list()[size_t(i)]);
        else
            append_utf8(s, cps[size_t(i)]);
    }
    return obj.is_list() ? Value::list(std::move(items)) : Value(std::move(s));
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
    case Value::Kind::Undefined:
        return false;
    case Value::Kind::String:
        if (!item.is_string())
            fail_invalid("'in <string>' requires string as left operand, not ", item.repr());
        return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::Array:
        for (const Value& x : container.as_list())
            if (equals(x, item)) return true;
        return false;
    case Value::Kind::Object:
        return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
        fail_invalid("argument of type ", container.repr(), " is not iterable");
    }
}

namespace {

int64_t checked(long double r) {
    if (r > (long double)INT64_MAX || r < (long double)INT64_MIN)
        fail_invalid("integer result out of range");
    return int64_t(r);
}

Value repeat(const Value& seq, int64_t times) {
    if (times <= 0) return seq.is_string() ? Value(std::string()) : Value::list();
    const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
    if (unit != 0)
        check_size(uint64_t(times) <= kMaxValueSize / unit ? size_t(times) * unit
                                                           : kMaxValueSize + 1);
    if (seq.is_string()) {
        std::string s;
        for (int64_t i = 0; i < times; ++i) s += seq.as_string();
        return Value(std::move(s));
    }
    List l;
    for (int64_t i = 0; i < times; ++i)
        l.insert(l.end(), seq.as_list().begin(), seq.as_list().end());
    return Value::list(std::move(l));
}

Value number_op(const std::string& op, const Value& a, const Value& b) {
    const bool ints = a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float;
    const int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
    const double fx = a.as_float(), fy = b.as_float();
    if (op == "+") return ints ? Value(checked((long double)x + y)) : Value(fx + fy);
    if (op == "-") return ints ? Value(checked((long double)x - y)) : Value(fx - fy);
    if (op == "*") return ints ? Value(checked((long double)x * y)) : Value(fx * fy);
    if (op == "/") {
        require(fy != 0, "division by zero");
        return Value(fx / fy);
    }
    if (op == "//" || op == "%") {
        require(ints ? y != 0 : fy != 0, "integer division or modulo by zero");
        if (ints) {
            if (x == INT64_MIN && y == -1) fail_invalid("integer result out of range");
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
            return op == "//" ? Value(q) : Value(r);
        }
        const double q = std::floor(fx / fy);
        return op == "//" ? Value(q) : Value(fx - q * fy);
    }
    if (op == "**") {
        if (ints && y >= 0) return Value(checked(std::pow((long double)x, (long double)y)));
        return Value(std::pow(fx, fy));
    }
    fail_invalid("unsupported operator ", op);
}

} // namespace

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    if (a.is_undefined() || b.is_undefined())
        fail_invalid("'", (a.is_undefined() ? a : b).name(), "' is undefined (operator ", op, ")");
    if (op == "neg" || op == "pos") {
        require(a.is_number(), "bad operand type for unary ", op == "neg" ? "-" : "+", ": ",
                a.repr());
        if (op == "pos") return a.kind() == Value::Kind::Bool ? Value(a.as_int()) : a;
        return a.kind() == Value::Kind::Float ? Value(-a.as_float())
                                              : Value(checked(-(long double)a.as_int()));
    }
    if (a.is_number() && b.is_number()) return number_op(op, a, b);
    if (op == "+" && a.is_string() && b.is_string()) {
        check_size(a.as_string().size() + b.as_string().size());
        return Value(a.as_string() + b.as_string());
    }
    if (op == "+" && a.is_list() && b.is_list()) {
        check_size(a.as_list().size() + b.as_list().size());
        List l = a.as_list();
        l.insert(l.end(), b.as_list().begin(), b.as_list().end());
        return Value::list(std::move(l));
    }
    if (op == "*" && (a.is_string() || a.is_list()) && b.is_number() &&
        b.kind() != Value::Kind::Float)
        return repeat(a, b.as_int());
    if (op == "*" && (b.is_string() || b.is_list()) && a.is_number() &&
        a.kind() != Value::Kind::Float)
        return repeat(b, a.as_int());
    fail_invalid("unsupported operand types for ", op, ": ", a.repr(), " and ", b.repr());
}

void install_globals(Dict& g) {
    g.set("range", Value::function("range", [](CallArgs& a) {
              int64_t start = 0, stop = 0, step = 1;
              for (const Value& v : a.args)
                  require(v.is_number() && v.kind() != Value::Kind::Float,
                          "range() needs integers");
              if (a.args.size() == 1)
                  stop = a.args[0].as_int();
              else if (a.args.size() >= 2)
                  start = a.args[0].as_int(), stop = a.args[1].as_int();
              if (a.args.size() == 3) step = a.args[2].as_int();
              require(!a.args.empty() && a.args.size() <= 3 && step != 0, "bad range() arguments");
              List items;
              for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
                  require(items.size() < 100000, "range() is too large (over 100000 items)");
                  items.emplace_back(i);
                  if (__builtin_add_overflow(i, step, &i)) break; // past the int64 range: done
              }
              return Value::list(std::move(items));
          }));
    g.set("namespace", Value::function("namespace", [](CallArgs& a) {
              Value ns = Value::namespace_object();
              for (const Value& d : a.args)
                  if (d.is_dict())
                      for (const auto& [k, v] : d.as_dict().items) ns.as_dict().set(k, v);
              for (const auto& [k, v] : a.kwargs) ns.as_dict().set(k, v);
              return ns;
          }));
    g.set("dict", Value::function("dict", [](CallArgs& a) {
              Value d = Value::dict();
              for (const Value& x : a.args)
                  if (x.is_dict())
                      for (const auto& [k, v] : x.as_dict().items) d.as_dict().set(k, v);
              for (const auto& [k, v] : a.kwargs) d.as_dict().set(k, v);
              return d;
          }));
    g.set("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
              fail_invalid("raise_exception: ", a.get(0, "message").str());
          }));
    g.set("strftime_now", Value::function("strftime_now", [](CallArgs& a) {
              const std::time_t t = std::time(nullptr);
              std::tm tm{};
              localtime_r(&t, &tm);
              char buf[256];
              const size_t n =
                  std::strftime(buf, sizeof buf, a.get(0, "format").str().c_str(), &tm);
              return Value(std::string(buf, n));
          }));
}

} // namespace ninfer::text::jinja::detail
