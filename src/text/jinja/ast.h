// Syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace ninfer::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

enum class ExprKind {
    Literal, // value
    Name,    // name
    ListLit, // args (negated: a tuple)
    DictLit, // kwargs: key expr in args[i], value in args[i + 1]
    Attr,    // args[0].name
    Item,    // args[0][args[1]]
    Slice,   // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    Call,    // args[0](args[1..], kwargs)
    Filter,  // args[0] | name(args[1..], kwargs)
    Test,    // args[0] is [not] name(args[1..])
    Unary,   // name in {not, -, +}; args[0]
    Binary,  // name is the operator; args[0], args[1]
    Compare, // args[0] ops[0] args[1] ops[1] args[2] ... (chained, Python semantics)
    Cond,    // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
    ExprKind kind;
    int line = 0;
    Value value;
    std::string name;
    std::vector<ExprPtr> args;
    KwArgs kwargs;
    bool negated = false;
    std::vector<std::string> ops;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
    Text,     // text
    Output,   // expr
    If,       // branches (cond, body); else_body
    For,      // targets in expr [if filter]: body; else_body
    Set,      // targets (one or more names) = expr; or attr: targets[0].attr = expr
    SetBlock, // targets[0] = rendered body
    Macro,    // name(params): body
    Break,
    Continue,
    Scope, // body rendered in place (generation blocks)
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr filter;
    std::vector<std::string> targets;
    std::string attr;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body, else_body;
    std::vector<std::pair<std::string, ExprPtr>> params;
};

} // namespace ninfer::text::jinja
