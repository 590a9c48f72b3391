// Internal: filters, tests, methods of str/dict/list, and globals of the Jinja interpreter.
#pragma once

#include <string>

#include "text/jinja/value.h"

namespace ninfer::text::jinja::detail {

// obj.name (jinja2 getattr: methods of dicts/strings/lists, then keys; Undefined otherwise).
Value get_attr(const Value& obj, const std::string& name);
// obj[key] (jinja2 getitem: keys and indexes, then methods; Undefined otherwise).
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings (absent parts are Undefined).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);

// Python's `in`.
bool contains(const Value& container, const Value& item);
// Python + - * / // % ** on values.
Value arithmetic(const std::string& op, const Value& a, const Value& b);

// range, namespace, dict, raise_exception, strftime_now.
void install_globals(Dict& globals);

} // namespace ninfer::text::jinja::detail
