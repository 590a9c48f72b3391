// JSON constraint, byte level: accept/reject tables for each supported keyword (the matcher
// against whole documents and prefixes), whitespace and depth limits, and schema errors.
// Token-level random walks and the mask benchmark are in test_json_constraint_walk.cpp.
#include <gtest/gtest.h>

#include "json_test_util.h"
#include "ninfer/error.h"

namespace {

using json_test::json;
using ninfer::text::json::Grammar;
using ninfer::text::json::Matcher;
using ninfer::text::json::Options;

bool matches(const json& schema, const std::string& text, const Options& o = {}) {
    Matcher m(Grammar::compile(schema, o));
    return m.advance(text) && m.can_end();
}

bool is_prefix(const json& schema, const std::string& text, const Options& o = {}) {
    Matcher m(Grammar::compile(schema, o));
    return m.advance(text);
}

struct Case {
    const char* schema;
    std::vector<std::string> accept, reject;
};

void run(const std::vector<Case>& cases, const Options& o = {}) {
    for (const auto& c : cases) {
        const json schema = json::parse(c.schema);
        for (const auto& t : c.accept) {
            EXPECT_TRUE(matches(schema, t, o)) << c.schema << " should accept " << t;
            // Accepted documents are valid JSON and valid against the schema.
            const json v = json::parse(t);
            EXPECT_TRUE(json_test::valid(schema, v, schema)) << c.schema << " / " << t;
            EXPECT_TRUE(Grammar::compile(schema, o)->validate(v)) << c.schema << " / " << t;
        }
        for (const auto& t : c.reject)
            EXPECT_FALSE(matches(schema, t, o)) << c.schema << " should reject " << t;
    }
}

TEST(JsonMatcher, Strings) {
    run({{R"({"type": "string"})",
          {R"("abc")", R"("")", R"("a\"b\\c\/")", R"("\b\f\n\r\t")", R"("\u00e9\u00E9")",
           R"("\ud83d\ude00")", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"", "\"\x7F\""},
          {"abc", R"("a)", R"("\x")", R"("\ud83d")", R"("\ude00")", R"("\ud83d\u0041")",
           R"("\ud83dx")", R"("\u12")", "\"a\nb\"", "\"\xC0\x80\"", "\"\xED\xA0\x80\"",
           "\"\xF4\x90\x80\x80\"", "\"\x80\"", "\"\xC3\"", "123", "null"}},
         {R"({"type": "string", "minLength": 2, "maxLength": 3})",
          {R"("ab")", R"("abc")", "\"\xC3\xA9\xF0\x9F\x98\x80\"", R"("\n\t")",
           R"("\ud83d\ude00\ud83d\ude00")"},
          {R"("a")", R"("abcd")", R"("\u0061\u0062\u0063\u0064")", R"("")", "\"\xC3\xA9\"",
           R"("\ud83d\ude00")"}}});
    // Prefixes ending inside a code point or an escape are fine; bad bytes are not.
    const json s = json::parse(R"({"type": "string"})");
    EXPECT_TRUE(is_prefix(s, "\"\xF0\x9F"));
    EXPECT_TRUE(is_prefix(s, R"("\ud83d\u)"));
    EXPECT_FALSE(is_prefix(s, R"("\ud83d\u00)"));
    EXPECT_FALSE(is_prefix(s, "\"\xF0\x20"));
}

TEST(JsonMatcher, Numbers) {
    run({{R"({"type": "integer"})",
          {"0", "-0", "12", "-7", "999999999999999999"},
          {"01", "1.0", "1e3", "-", "+1", "1234567890123456789", ".5", "1 ", "\"1\""}},
         {R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 10})",
          {"-5", "0", "9", "-0"},
          {"-6", "10", "100", "-50", "-10"}},
         {R"({"type": "integer", "exclusiveMinimum": 1.5, "maximum": 3.7})",
          {"2", "3"},
          {"1", "4"}},
         {R"({"type": "number"})",
          {"0", "-0.5", "1.25e-3", "1E+2", "3.0", "12e34", "123456789012345678.123456789012345678"},
          {"1.", ".5", "1e", "1e+", "1e123", "00", "NaN", "Infinity", "-", "0x1", "1.2.3",
           "1.1234567890123456789"}},
         {R"({"type": "number", "minimum": 0.5, "maximum": 2.5})",
          {"0.5", "2.5", "1", "2.49999", "0.50"},
          {"0.4999", "2.51", "3", "-1", "1e0", "25"}},
         {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
          {"0.5", "0.000001", "0.999"},
          {"0", "1", "-0.1", "1.0", "0.0"}},
         {R"({"type": "number", "minimum": 0.3, "maximum": 0.3})", {"0.3"}, {"0.31", "0.29"}}});
}

TEST(JsonMatcher, LiteralsAndTypes) {
    run({{R"({"type": "boolean"})", {"true", "false"}, {"True", "tru", "1", "null"}},
         {R"({"type": "null"})", {"null"}, {"nul", "nulll", "0"}},
         {R"({"type": ["string", "null"], "maxLength": 1})", {"\"x\"", "null"}, {"\"xy\"", "1"}},
         {R"({"enum": ["red", "green", 3, null, {"a": 1}, [1, 2], 1, 12]})",
          {"\"red\"", "\"green\"", "3", "null", "{\"a\":1}", "[1,2]", "1", "12"},
          {"\"blue\"", "{\"a\": 1}", "4", "\"re\"", "13", "[1, 2]"}},
         {R"({"const": "x"})", {"\"x\""}, {"\"y\"", "x"}},
         {R"({"type": "string", "enum": ["ab", "abc", 5], "maxLength": 2})",
          {"\"ab\""},
          {"\"abc\"", "5"}},
         {R"({"type": "string", "nullable": true})", {"null", "\"x\""}, {"1"}},
         {R"({"type": "string", "pattern": "^[0-9]+$", "format": "date"})", {"\"abc\""}, {}},
         {"{}", {"[1,\"a\",{\"b\":null}]", "3", "\"s\"", "true"}, {"", "[1,]"}},
         {"true", {"null", "{}"}, {}}});
}

TEST(JsonMatcher, Objects) {
    run({{R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a"], "additionalProperties": false})",
          {R"({"a":1})", R"({"a": 1, "b": "x"})", R"({"b":"x","a":1})", R"({ "a" : 1 })"},
          {"{}", R"({"b":"x"})", R"({"a":1,"a":2})", R"({"a":1,"c":2})", R"({"a":"1"})",
           R"({"a":1,})", R"({"a":1} )", R"( {"a":1})", R"({"a":  1})", R"({"\u0061":1})",
           R"({"a":1}{)", "{\"a\":\n1}"}},
         {R"({"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": {"type": "string"}})",
          {R"({"a":1,"x":"y"})", R"({"x":"y","\u0061":2})", "{}", R"({"":""})"},
          {R"({"x":1})", R"({"x":"y","x":"z"})", R"({"a":1,"\u0061":2})", R"({"\u0061":"s"})",
           R"({"x":"y","\u0078":"z"})"}},
         {R"({"properties": {"a": {}}})", {R"({"a":[]})", "{}"}, {R"({"b":1})"}},
         {R"({"type": "object"})", {R"({"k":[1,{"z":null}],"\ud83d\ude00":1})"}, {"[]"}},
         {R"({"type": "object", "properties": {"a": false, "b": {"type": "null"}}})",
          {R"({"b":null})"},
          {R"({"a":1})"}},
         {R"({"type": "object", "required": ["x"]})", {R"({"x":1,"y":2})"}, {R"({"y":2})"}}});
    Options open;
    open.closed_objects = false;
    EXPECT_TRUE(matches(json::parse(R"({"properties": {"a": {}}})"), R"({"b":1})", open));
}

TEST(JsonMatcher, Arrays) {
    run({{R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2})",
          {"[1]", "[1, 2]", "[ 1 ,2 ]"},
          {"[]", "[1,2,3]", "[\"a\"]", "[1,]", "[,1]"}},
         {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
              "items": false})",
          {"[\"a\",1]", "[\"a\"]", "[]"},
          {"[1]", "[\"a\",1,2]"}},
         {R"({"type": "array", "prefixItems": [{"type": "string"}], "minItems": 2,
              "items": {"type": "boolean"}})",
          {"[\"a\",true]", "[\"a\",true,false]"},
          {"[\"a\"]", "[\"a\",1]"}},
         {R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": false})",
          {"[1]", "[]"},
          {"[1,2]"}},
         {R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"}}});
}

TEST(JsonMatcher, CombinatorsAndRefs) {
    run({{R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
          {"5", "\"a\""},
          {"\"ab\"", "true"}},
         {R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"},
              "x": {"type": "integer"}}, "required": ["kind", "x"], "additionalProperties": false},
              {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
              "required": ["kind", "y"], "additionalProperties": false}]})",
          {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})", R"({"x":1,"kind":"a"})"},
          {R"({"kind":"a","y":"s"})", R"({"kind":"c"})"}},
         {R"({"allOf": [{"type": "integer"}], "description": "d", "default": 1})",
          {"3"},
          {"\"x\""}},
         {R"({"$defs": {"pos": {"type": "integer", "minimum": 0}}, "type": "object",
              "properties": {"p": {"$ref": "#/$defs/pos"}}, "required": ["p"]})",
          {R"({"p":3})"},
          {R"({"p":-1})", "{}"}},
         {R"({"definitions": {"s": {"type": "string"}}, "items": {"$ref": "#/definitions/s"}})",
          {"[\"a\"]"},
          {"[1]"}},
         {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"],
              "additionalProperties": false}}, "$ref": "#/$defs/node"})",
          {R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]})"},
          {R"({"kids":[]})", R"({"v":1,"kids":[{}]})"}},
         {R"({"anyOf": [{"type": "number"}, {"type": "integer"}]})", {"1", "1.5"}, {"1x"}}});
    // Many const branches are one literal set (not one matcher thread each).
    json consts = json::array();
    for (int i = 0; i < 600; ++i) consts.push_back({{"const", "v" + std::to_string(i)}});
    const json many = {{"anyOf", consts}};
    EXPECT_TRUE(matches(many, "\"v599\""));
    EXPECT_FALSE(matches(many, "\"v600\""));
    Matcher m(Grammar::compile(many));
    EXPECT_TRUE(m.advance("\"v1"));
    EXPECT_EQ(m.threads(), 1u);
    EXPECT_TRUE(matches(json(), "{}"));
    EXPECT_TRUE(matches(json(), R"({"a":[1,{"b":"c"}]})"));
    EXPECT_FALSE(matches(json(), "[]"));
    EXPECT_FALSE(matches(json(), "1"));
}

TEST(JsonMatcher, WhitespaceAndDepth) {
    Options pretty;
    pretty.allow_newlines = true;
    pretty.max_whitespace = 8;
    const json any = json::parse("{}");
    EXPECT_TRUE(matches(any, "{\n  \"a\": [\n    1\n  ]\n}", pretty));
    EXPECT_FALSE(matches(any, "{\n         \"a\": 1}", pretty));
    EXPECT_FALSE(matches(any, "{\n  \"a\": 1}"));
    Options compact;
    compact.max_whitespace = 0;
    EXPECT_TRUE(matches(any, R"({"a":[1,2]})", compact));
    EXPECT_FALSE(matches(any, R"({"a": 1})", compact));
    Options shallow;
    shallow.max_depth = 4; // frames: the root, containers, and the scalar or key being written
    EXPECT_TRUE(matches(any, "[[1]]", shallow));
    EXPECT_TRUE(matches(any, "[[[]]]", shallow));
    EXPECT_FALSE(is_prefix(any, "[[[[", shallow));
    EXPECT_FALSE(is_prefix(any, "[[[1", shallow));
    EXPECT_FALSE(is_prefix(any, "[[{\"", shallow));
    // Recursion is cut where values can still close.
    shallow.max_depth = 6;
    const json tree = json::parse(
        R"({"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#"}}}})");
    EXPECT_TRUE(matches(tree, R"({"k":[{"k":[{}]}]})", shallow));
    EXPECT_FALSE(is_prefix(tree, R"({"k":[{"k":[{")", shallow));
    EXPECT_THROW(Grammar::compile(json::parse(R"({"type": "array", "minItems": 1, "items":
        {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1}}})"),
                                  [] {
                                      Options o;
                                      o.max_depth = 4;
                                      return o;
                                  }()),
                 ninfer::Error);
}

// The completion a bounded constraint closes with exists from every state and ends the value,
// also where the plain greedy walk never ends it: an object lacking a required key that its
// properties do not declare (found by fuzz_json_constraint: the walk wrote "", "}", "}}", ...
// as keys forever).
TEST(JsonMatcher, GreedyCompletionEndsTheValue) {
    const auto close = [](const char* schema, const char* prefix) {
        Matcher m(Grammar::compile(json::parse(schema)));
        EXPECT_TRUE(m.advance(std::string_view(prefix))) << prefix;
        const auto c = ninfer::text::json::greedy_completion(m);
        EXPECT_TRUE(c.has_value()) << schema << " after " << prefix;
        if (c) {
            EXPECT_TRUE(m.advance(*c) && m.can_end()) << prefix << *c;
        }
        return c.value_or("");
    };
    EXPECT_EQ(close(R"({"type": "object", "properties": {"a": {"type": "integer"}}})", R"({"a": 1)"),
              "}");
    EXPECT_EQ(close(R"({"type": "array", "items": {"type": "string"}})", R"(["x", "ab)"), "\"]");
    // Inside a UTF-8 sequence (a byte-level token can split a character): its continuation.
    EXPECT_EQ(close(R"({"type": "string"})", "\"abc\xe3"), "\x80\x80\"");
    const std::string undeclared = close(R"({"type": "object", "propertihs": {"a": {"type":
        "integer"}}, "required": ["a"]})", R"({"c": 0)");
    EXPECT_NE(undeclared.find("\"a\""), std::string::npos) << undeclared;
    // Longer undeclared names, which no single byte ahead reaches.
    for (const char* name : {"-a", "name"}) {
        const std::string schema = std::string(R"({"type": "object", "required": [")") + name +
                                   R"("], "additionalProperties": {"type": "integer"}})";
        const std::string c = close(schema.c_str(), R"({"a": 62)");
        EXPECT_NE(c.find(std::string("\"") + name + "\""), std::string::npos) << c;
    }
    // The same after a key the walk would repeat ("" again is a duplicate), over a long budget.
    Matcher m(Grammar::compile(json::parse(R"({"type": "object", "propepties": {"a": {"type":
        "integer"}}, "required": ["a"]})")));
    ASSERT_TRUE(m.advance(std::string_view(R"({"": 22)")));
    const auto c = ninfer::text::json::greedy_completion(m, 4000);
    ASSERT_TRUE(c.has_value());
    EXPECT_TRUE(m.advance(*c) && m.can_end()) << *c;
    EXPECT_LT(undeclared.size(), 16u) << undeclared;
}

TEST(JsonSchema, Errors) {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {R"({"not": {}})", "keyword 'not' is not supported"},
        {R"({"type": "foo"})", "unknown type 'foo'"},
        {R"({"$ref": "#/nope"})", "does not resolve"},
        {R"({"$ref": "http://x/y.json"})", "only local refs"},
        {R"({"allOf": [{}, {}]})", "single subschema"},
        {R"({"type": "string", "minLength": 3, "maxLength": 2})", "minLength"},
        {R"({"type": "object", "required": ["a"], "additionalProperties": false})",
         "required property 'a'"},
        {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems"},
        {R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})", "minItems"},
        {R"({"enum": []})", "no value of enum/const"},
        {R"({"type": "integer", "enum": ["a"]})", "no value of enum/const"},
        {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer"},
        {R"({"type": "number", "minimum": 1, "exclusiveMaximum": 1})", "no number"},
        {R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "no finite"},
        {R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})",
         "no finite"},
        {"5", "must be an object or a boolean"},
        {"false", "no finite"},
        {R"({"type": "string", "anyOf": [{}]})", "beside 'anyOf'"},
        {R"({"$ref": "#/$defs/a", "minimum": 1, "$defs": {"a": {}}})", "beside '$ref'"},
        {R"({"uniqueItems": true})", "uniqueItems"},
        {R"({"minProperties": 1})", "minProperties"},
        {R"({"multipleOf": 2})", "multipleOf"},
        {R"({"patternProperties": {}})", "patternProperties"},
        {R"({"if": {}})", "keyword 'if'"},
        {R"({"properties": {"a": {"properties": {"b": {"not": {}}}}}})",
         "#/properties/a/properties/b"},
        {R"({"type": "array", "minItems": -1})", "non-negative integer"},
        {R"({"properties": []})", "'properties' must be an object"},
        {R"({"anyOf": []})", "non-empty array"},
        {R"({"type": "integer", "minimum": "1"})", "must be a number"},
    };
    for (const auto& [schema, message] : bad) {
        try {
            Grammar::compile(json::parse(schema));
            ADD_FAILURE() << schema << " compiled";
        } catch (const ninfer::Error& e) {
            EXPECT_EQ(e.category(), ninfer::ErrorCategory::InvalidArgument);
            EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
                << schema << ": " << e.what();
        }
    }
    // Annotations, unknown keywords and harmless forms are accepted.
    EXPECT_NO_THROW(Grammar::compile(json::parse(
        R"({"title": "t", "description": "d", "$schema": "x", "examples": [], "x-foo": 1,
            "uniqueItems": false, "unevaluatedProperties": true, "type": "object",
            "properties": {"a": {"type": "string", "format": "email", "pattern": "["}}})")));
    const auto& tok = json_test::tiny();
    EXPECT_THROW(ninfer::text::make_json_constraint(json(), tok, {}), ninfer::Error);
    EXPECT_THROW(ninfer::text::make_json_constraint(json::parse(R"({"not": 1})"), tok, {1}),
                 ninfer::Error);
}

} // namespace
