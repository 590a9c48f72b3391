// A Jinja template interpreter complete for what chat templates use (HF transformers renders
// them with jinja2, trim_blocks and lstrip_blocks on, loop controls, and its own tojson,
// raise_exception and strftime_now). Output is byte-identical to jinja2's on the Qwen templates
// (tests/text/check_template_oracle.py proves it).
//
// Supported: {{ }}, {% if/elif/else %}, {% for a[, b] in x [if c] %} with else, loop.* and
// break/continue, {% set %} (names, tuples, namespace attributes, blocks), {% macro %} with
// defaults and keyword arguments, {% generation %}, comments and whitespace control; the
// expression grammar of jinja2 (literals, lists, dicts, tuples, attribute/item access, slices,
// calls, filters, tests, conditional expressions, arithmetic, ~, comparisons, in, and/or/not)
// with Python value semantics. Not supported (a clear error): include/extends/block/import,
// call blocks, filter blocks, recursive loops, % string formatting.
#pragma once

#include <memory>
#include <string>

#include "text/jinja/value.h"

namespace ninfer::text::jinja {

struct RenderLimits {
    int64_t max_steps = 20'000'000; // statements, loop iterations and calls
    size_t max_output = 64u << 20;  // bytes of output
    int max_call_depth = 200;       // nested macro calls
};

class Template {
public:
    // Parses `source`; syntax errors raise ninfer::Error (InvalidArgument) naming the line.
    explicit Template(const std::string& source);
    ~Template();
    Template(Template&&) noexcept;
    Template& operator=(Template&&) noexcept;

    // Renders with the variables of `context` (a dict Value) and the globals range, namespace,
    // dict, raise_exception and strftime_now. Runtime errors (undefined attribute access, type
    // errors, raise_exception, exceeded limits) raise ninfer::Error (InvalidArgument) naming
    // the template line.
    std::string render(const Value& context, const RenderLimits& limits = {}) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::text::jinja
