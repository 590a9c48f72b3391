// Values of the Jinja interpreter, with Python semantics (what jinja2 does, since it runs on
// Python objects): truthiness, ==, ordering, str(), repr() and json.dumps(). Lists, dicts and
// namespaces are shared by reference, like Python objects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ninfer::text::jinja {

class Value;
struct Dict;
struct CallArgs;
using List = std::vector<Value>;
using Function = std::function<Value(CallArgs&)>;

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Callable };

    Value() = default; // Undefined
    static Value undefined(std::string hint = {});
    static Value none();
    Value(bool b);
    Value(int64_t i);
    Value(int i) : Value(int64_t(i)) {}
    Value(double f);
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    static Value list(List items = {});
    static Value tuple(List items); // a list that prints as a Python tuple
    static Value dict();
    static Value namespace_object();
    static Value function(std::string name, Function fn);
    // Converts JSON (objects keep their key order: parse with nlohmann::ordered_json).
    static Value from_json(const nlohmann::ordered_json& j);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::Array; }
    bool is_tuple() const { return kind_ == Kind::Array && b_; }
    bool is_dict() const { return kind_ == Kind::Object; }
    bool is_number() const {
        return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
    }
    bool is_namespace() const;

    bool as_bool() const { return b_; }
    int64_t as_int() const;  // Bool and Int
    double as_float() const; // any number
    const std::string& as_string() const { return s_; }
    List& as_list() const { return *list_; }
    Dict& as_dict() const { return *dict_; }
    const Function& as_function() const { return *fn_; }
    const std::string& name() const { return s_; } // Undefined hint / function name

    bool truthy() const;
    std::string str() const;  // Python str()
    std::string repr() const; // Python repr()
    // Length for |length: code points of strings, items of lists and dicts; 0 for Undefined.
    int64_t length() const;
    // Items of iteration: list items, dict keys, string code points; Undefined is empty.
    List iterate() const;
    bool same_object(const Value& o) const;

private:
    Kind kind_ = Kind::Undefined;
    bool b_ = false;
    int64_t i_ = 0;
    double f_ = 0;
    std::string s_;
    std::shared_ptr<List> list_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<Function> fn_;
};

// An insertion-ordered str -> Value map (Python dict with string keys).
struct Dict {
    std::vector<std::pair<std::string, Value>> items;
    std::unordered_map<std::string, size_t> index;
    bool is_namespace = false;
    const Value* find(const std::string& key) const;
    void set(const std::string& key, Value v);
};

struct CallArgs {
    List args;
    std::vector<std::pair<std::string, Value>> kwargs;
    // The argument at `pos` or named `name`; Undefined when absent.
    Value get(size_t pos, const char* name) const;
    Value get(size_t pos, const char* name, Value fallback) const;
};

// Largest string (bytes) or list (items) an operation may build: raises InvalidArgument beyond.
constexpr size_t kMaxValueSize = size_t(64) << 20;
void check_size(size_t n);

// Python ==, and the ordering of <, <=, >, >= (raises InvalidArgument for unorderable types).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// Python repr() of a float (shortest round trip, exponent outside [1e-4, 1e16)).
std::string float_repr(double f);

struct JsonOptions {
    bool ensure_ascii = false;
    int indent = -1; // < 0: none
    std::string indent_text;
    std::string item_sep = ", ";
    std::string key_sep = ": ";
    bool sort_keys = false;
};
// Python json.dumps(value, ...) (Undefined and functions raise InvalidArgument).
std::string to_json(const Value& v, const JsonOptions& options);

} // namespace ninfer::text::jinja
