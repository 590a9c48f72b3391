// Internal: the recursive-descent Jinja parser (statements in parser.cpp, expressions in
// parser_expr.cpp), following jinja2's grammar and operator precedence.
#pragma once

#include <set>
#include <string>

#include "core/error.h"
#include "text/jinja/parser.h"

namespace ninfer::text::jinja::detail {

constexpr int kMaxDepth = 200; // nesting of expressions and blocks (stack safety)

class Parser {
public:
    explicit Parser(const std::vector<Token>& t) : t_(t) {}

    Body parse_template() {
        auto [body, end] = parse_body({});
        return std::move(body);
    }

private:
    const Token& cur() const { return t_[i_]; }
    const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
    bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
    bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
    [[noreturn]] void error(const std::string& what) const {
        fail_invalid("template line ", cur().line, ": ", what,
                     cur().type == Tok::End ? " (at end of template)" : "");
    }
    void expect_op(const char* op) {
        if (!is_op(op)) error(std::string("expected '") + op + "'");
        next();
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) error("expected a name");
        return next().text;
    }
    void expect_block_end() {
        if (cur().type != Tok::BlockEnd) error("expected end of tag '%}'");
        next();
    }
    struct DepthGuard {
        int& d;
        explicit DepthGuard(int& depth, const Parser& p) : d(depth) {
            if (++d > kMaxDepth) p.error("template nested too deeply");
        }
        ~DepthGuard() { --d; }
    };
    ExprPtr make(ExprKind k, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = line;
        return e;
    }

    std::pair<Body, std::string> parse_body(const std::set<std::string>& ends);
    std::unique_ptr<Stmt> parse_statement();
    std::unique_ptr<Stmt> parse_if(int line);
    std::unique_ptr<Stmt> parse_for(int line);
    std::unique_ptr<Stmt> parse_set(int line);
    std::unique_ptr<Stmt> parse_macro(int line);

    ExprPtr parse_expression(bool with_cond = true);
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    ExprPtr parse_binary_level(int level);
    ExprPtr parse_unary(bool with_filter);
    ExprPtr parse_primary();
    ExprPtr parse_parenthesised(int line);
    ExprPtr parse_collection(int line);
    ExprPtr parse_postfix(ExprPtr e);
    ExprPtr parse_filters(ExprPtr e);
    ExprPtr parse_test(ExprPtr e);
    void parse_call_args(Expr& call);

    const std::vector<Token>& t_;
    size_t i_ = 0;
    int depth_ = 0;
};

} // namespace ninfer::text::jinja::detail
