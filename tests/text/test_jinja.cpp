// The Jinja interpreter on its own: semantics that chat templates rely on, Python value
// formatting, and clear errors (never crashes) for broken templates and runaway rendering. The
// jinja2 oracle (check_template_oracle.py) compares it with Python on many more templates.
#include <gtest/gtest.h>

#include "ninfer/error.h"
#include "text/jinja/template.h"

using ninfer::text::jinja::RenderLimits;
using ninfer::text::jinja::Template;
using ninfer::text::jinja::Value;

namespace {

std::string render(const std::string& src, const std::string& ctx_json = "{}",
                   const RenderLimits& limits = {}) {
    return Template(src).render(Value::from_json(nlohmann::ordered_json::parse(ctx_json)), limits);
}

std::string error_of(const std::string& src, const std::string& ctx_json = "{}",
                     const RenderLimits& limits = {}) {
    try {
        render(src, ctx_json, limits);
    } catch (const ninfer::Error& e) {
        EXPECT_EQ(e.category(), ninfer::ErrorCategory::InvalidArgument);
        return e.what();
    }
    ADD_FAILURE() << "no error for " << src;
    return "";
}

} // namespace

TEST(Jinja, WhitespaceControlAsHfConfiguresIt) {
    EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
    EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
    EXPECT_EQ(render("x\n    {# c #}\ny\n"), "x\ny");
    EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}\n\n"), "a\nb\n");
    EXPECT_EQ(render("a {%+ if true %}b{% endif %}"), "a b");
}

TEST(Jinja, ScopesLoopsMacrosNamespaces) {
    EXPECT_EQ(
        render("{% set v = 0 %}{% for x in [1, 2] %}{% set v = v + x %}{{ v }}{% endfor %}{{ v }}"),
        "120");
    EXPECT_EQ(render("{% set ns = namespace(v=0) %}{% for x in [1, 2] %}{% set ns.v = ns.v + x %}"
                     "{% endfor %}{{ ns.v }}"),
              "3");
    EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.index0 }}{{ x }}{{ loop.last }} {% endfor %}"),
              "0aFalse 1bTrue ");
    EXPECT_EQ(
        render(
            "{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
        "13");
    EXPECT_EQ(render("{% macro m(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) "
                     "| trim }}"),
              "[1d][23]");
    EXPECT_EQ(render("{% for m in messages[::-1] %}{{ m.role }}{% endfor %}",
                     R"({"messages": [{"role": "a"}, {"role": "b"}]})"),
              "ba");
}

TEST(Jinja, PythonValueSemantics) {
    EXPECT_EQ(render("{{ [1, 'a', none, true, 2.5] }}"), "[1, 'a', None, True, 2.5]");
    EXPECT_EQ(render("{{ {'k': (1,)} }}"), "{'k': (1,)}");
    EXPECT_EQ(render("{{ 1e-5 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 7 // -2 }} {{ -7 % 3 }}"),
              "1e-05 1e+16 0.30000000000000004 -4 2");
    EXPECT_EQ(render("{{ 'a b  c'.split() }} {{ 'x,y'.split(',') }} {{ ' s '|trim }}"),
              "['a', 'b', 'c'] ['x', 'y'] s");
    EXPECT_EQ(render(R"({{ {"b": 1, "a": [1.0, "é\n"]}|tojson }})"),
              R"({"b": 1, "a": [1.0, "é\n"]})");
    EXPECT_EQ(
        render("{{ x.y is defined }} {{ x is mapping }} {{ 'ab' is string }}", R"({"x": {}})"),
        "False True True");
    EXPECT_EQ(render("{{ t | tojson }}", R"({"t": {"z": 1, "a": 2}})"), R"({"z": 1, "a": 2})");
}

TEST(Jinja, BrokenTemplatesAreErrorsWithLines) {
    EXPECT_NE(error_of("ok\n{% if x %}").find("line"), std::string::npos);
    EXPECT_NE(error_of("{{ 'x' ").find("line 1"), std::string::npos);
    EXPECT_NE(error_of("{% include 'x' %}").find("unsupported tag"), std::string::npos);
    EXPECT_NE(error_of("a\nb\n{{ missing.attr }}").find("line 3"), std::string::npos);
    EXPECT_NE(error_of("{{ raise_exception('No user query') }}").find("No user query"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 1 + 'a' }}").find("unsupported operand"), std::string::npos);
    EXPECT_NE(error_of("{{ x | nope }}").find("no filter named"), std::string::npos);
    EXPECT_NE(error_of("{% set x.y = 1 %}").find("non-namespace"), std::string::npos);
    EXPECT_THROW(Template("\xFF"), ninfer::Error);
}

TEST(Jinja, RunawayTemplatesHitLimits) {
    RenderLimits small;
    small.max_steps = 1000;
    EXPECT_NE(error_of("{% for i in range(100000) %}{% endfor %}", "{}", small).find("steps"),
              std::string::npos);
    EXPECT_NE(error_of("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}").find("nested deeper"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 'x' * 100000000 }}").find("too large"), std::string::npos);
    EXPECT_NE(
        error_of(
            "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}"
            "{% endfor %}{{ ns.l }}")
            .find("too large"),
        std::string::npos);
    std::string deep(5000, '(');
    EXPECT_NE(error_of("{{ " + deep + " }}").find("nested too deeply"), std::string::npos);
}

TEST(Jinja, FuzzFindingsStayErrors) {
    // integer attribute beyond int64 (fuzz_template finding): an error, not std::terminate
    EXPECT_THROW(Template("{{ 'ab'.77777777777777777777777777 }}"), ninfer::Error);
    // float -> int conversion out of range (fuzz_template finding, UBSan)
    EXPECT_EQ(render("{{ [2.5e+40, 1e30 - 0.0] | tojson }}"), "[2.5e+40, 1e+30]");
    EXPECT_THROW(render("{{ 1e30 | int }}"), ninfer::Error);
    // a namespace made to hold itself (fuzz_template finding: a leaked shared_ptr cycle, ASan)
    EXPECT_NE(error_of("{% set ns = namespace(t='') %}{% set ns.t = ns, 'x' %}").find("a cycle"),
              std::string::npos);
    EXPECT_NE(error_of("{% set a = namespace(x=1) %}{% set b = namespace(y=a) %}"
                       "{% set a.x = {'k': [b]} %}")
                  .find("a cycle"),
              std::string::npos);
    // values that only share parts are fine, however often they share them
    EXPECT_EQ(render("{% set ns = namespace(l=[1]) %}{% for i in range(30) %}"
                     "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | length }}"),
              "2");
}
