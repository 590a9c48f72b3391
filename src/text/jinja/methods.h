// Internal: the Python methods templates call on values (str.split, dict.items, ...). The
// sandbox of HF's jinja2 environment is immutable, so no mutating method exists here either.
#pragma once

#include <string>

#include "text/jinja/value.h"

namespace ninfer::text::jinja::detail {

// obj.name as a bound method, or Undefined when obj's type has no such method.
Value bound_method(const Value& obj, const std::string& name);

// Python str.split / str.rsplit (sep Undefined or None: runs of whitespace).
List py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right);

} // namespace ninfer::text::jinja::detail
