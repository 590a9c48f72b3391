// JSON Schema compiled into the grammar that the JSON matcher (json_matcher.h) walks byte by byte.
//
// Supported keywords (everything else that constrains values is rejected with
// ninfer::Error InvalidArgument naming the keyword and its JSON pointer):
//   enforced:  type (object, array, string, number, integer, boolean, null, and type arrays),
//              properties, required, additionalProperties (false / true / schema),
//              items, prefixItems (and draft-4 array `items` + additionalItems), minItems,
//              maxItems, enum, const, anyOf, oneOf (generated as anyOf: the output matches at
//              least one branch), allOf with a single entry, $ref to any local JSON pointer
//              ("#", "#/$defs/X", "#/definitions/X", ...; recursion allowed), nullable
//              (OpenAPI), minLength, maxLength, minimum, maximum, exclusiveMinimum,
//              exclusiveMaximum (numeric and draft-4 boolean forms), uniqueItems: false,
//              boolean schemas true / false.
//   accepted, not enforced: pattern, format, contentEncoding, contentMediaType (strings are
//              only held to the other keywords); annotations (title, description, default,
//              examples, $schema, $id, $comment, deprecated, readOnly, writeOnly, discriminator,
//              ...) and unknown keywords, which JSON Schema treats as annotations.
//   rejected:  not, if/then/else, allOf with several entries, patternProperties,
//              propertyNames, min/maxProperties, dependencies, dependentRequired,
//              dependentSchemas, uniqueItems: true, contains, min/maxContains, multipleOf,
//              unevaluatedProperties/unevaluatedItems (other than true), $dynamicRef,
//              $recursiveRef, remote $ref, validation keywords beside anyOf/oneOf/allOf/$ref,
//              schemas no finite value satisfies (e.g. a required property whose schema is
//              false, or minLength > maxLength).
// What the generated text looks like (a subset of JSON, always valid against the schema):
//   - object keys in any order, each at most once (also when spelled with escapes); where only
//     declared keys may come they are spelled as nlohmann::json dumps them; when
//     additionalProperties is absent from a schema that has `properties`, extra keys are not
//     generated (options.closed_objects, default on);
//   - numbers: at most 18 integer digits, 18 fraction digits and 2 exponent digits (no exponent
//     when the number has bounds); integers have no fraction or exponent; bounds hold for the
//     double the text parses to (bounds too close for 18 fraction digits are rejected);
//   - enum/const values are spelled as nlohmann::json dumps them (compact);
//   - strings: any valid UTF-8, all JSON escapes including \uXXXX (surrogates paired);
//   - whitespace: at most options.max_whitespace bytes (space only, or also \n \r \t with
//     options.allow_newlines) in each gap between structural characters, none before or after
//     the top-level value;
//   - nesting: at most options.max_depth open frames (containers, plus the scalar or key being
//     written); recursive schemas are cut off there (only values that can still close are
//     offered);
//   - anyOf/oneOf/type arrays run as parallel alternatives (their literals merged into one);
//     more than 256 alive at once is a runtime ninfer::Error (the request fails, no bad text).
#pragma once

#include <bitset>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ninfer::text::json {

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kUnsat = 1u << 20; // Node::need of a schema no value satisfies

struct Options {
    int max_whitespace = 1;      // whitespace bytes allowed in one gap (0: compact JSON)
    bool allow_newlines = false; // also \n, \r and \t in gaps (pretty printing)
    int max_depth = 48;          // most frames on the matcher stack
    bool closed_objects = true;  // no extra keys when `properties` is given but
                                 // additionalProperties is not
};

enum class NodeKind : uint8_t { Object, Array, String, Number, Integer, Literal, Union };

struct Property {
    std::string name;  // decoded
    uint32_t node = 0; // the value's schema
    bool required = false;
};

struct Node {
    NodeKind kind = NodeKind::Union;
    std::vector<uint32_t> alts; // Union: the non-union nodes it stands for (flattened)
    // Object
    std::vector<Property> props;
    std::vector<uint32_t> by_name;      // property indices sorted by decoded name
    std::vector<std::string> key_texts; // `"name"` as dumped, sorted
    std::vector<uint32_t> key_prop;     // property index of each key_texts entry
    uint32_t additional = kNone;        // schema of other keys; kNone: none allowed
    // Array
    std::vector<uint32_t> prefix;
    uint32_t items = kNone; // schema of the items after prefix; kNone: none allowed
    uint32_t min_items = 0, max_items = std::numeric_limits<uint32_t>::max();
    // String (lengths in code points)
    uint32_t min_length = 0, max_length = std::numeric_limits<uint32_t>::max();
    // Number and Integer bounds
    bool has_lo = false, has_hi = false; // Number (Integer: always both)
    double lo = 0, hi = 0;               // Number, inclusive (exclusive bounds are moved to
                                         // the next double)
    int64_t ilo = 0, ihi = 0;            // Integer, inclusive
    // Literal: the texts (sorted, unique) and their values
    std::vector<std::string> texts;
    std::vector<nlohmann::json> values;
    // Derived
    uint32_t need = kUnsat; // fewest stack frames a value of this node needs (kUnsat: none)
    std::bitset<256> first; // bytes a value may start with (non-union nodes)

    uint32_t item_at(uint32_t index) const { return index < prefix.size() ? prefix[index] : items; }
};

class Grammar {
public:
    // Compiles `schema` (null: any JSON object). Raises ninfer::Error (InvalidArgument) on
    // malformed or unsupported schemas, naming the keyword and where it is.
    static std::shared_ptr<const Grammar> compile(const nlohmann::json& schema,
                                                  const Options& options = {});

    std::vector<Node> nodes;
    uint32_t root = 0;
    Options options;
    std::bitset<256> whitespace; // bytes allowed in gaps

    // Whether `value` satisfies the compiled schema (the matcher's semantics; used to filter
    // enum values and as a test oracle).
    bool validate(const nlohmann::json& value) const { return validate(root, value); }
    bool validate(uint32_t node, const nlohmann::json& value) const;
};

// Number of Unicode code points of valid UTF-8 text.
size_t utf8_length(const std::string& s);

} // namespace ninfer::text::json

namespace ninfer::text::json::detail {
// Compiles `schema` into g.nodes (json_schema.cpp); returns the root node.
uint32_t compile_schema(const nlohmann::json& schema, Grammar& g);
std::string percent_decode(const std::string& s);
std::string escape_pointer(const std::string& key); // one JSON pointer token
Node leaf(NodeKind kind);
void index_keys(Node& n); // fills by_name, key_texts and key_prop from props
template <typename Words> bool has_any(const nlohmann::json& s, const Words& words) {
    for (const char* w : words)
        if (s.contains(w)) return true;
    return false;
}
} // namespace ninfer::text::json::detail
