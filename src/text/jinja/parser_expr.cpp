// Expressions, with jinja2's precedence: conditional < or < and < not < comparisons
// (== != < <= > >= in, not in) < + - < ~ < * / // % < ** < unary - + < postfix (. [] ())
// and filters/tests (| and is).
#include "text/jinja/parser_impl.h"

namespace ninfer::text::jinja::detail {

ExprPtr Parser::parse_expression(bool with_cond) {
    DepthGuard g(depth_, *this);
    ExprPtr e = parse_or();
    while (with_cond && is_name("if")) {
        const int line = cur().line;
        next();
        auto c = make(ExprKind::Cond, line);
        c->args.push_back(parse_or());
        c->args.push_back(std::move(e));
        if (is_name("else")) {
            next();
            c->args.push_back(parse_expression());
        } else {
            c->args.push_back(nullptr);
        }
        e = std::move(c);
    }
    return e;
}

ExprPtr Parser::parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
        auto b = make(ExprKind::Binary, cur().line);
        next();
        b->name = "or";
        b->args.push_back(std::move(e));
        b->args.push_back(parse_and());
        e = std::move(b);
    }
    return e;
}

ExprPtr Parser::parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
        auto b = make(ExprKind::Binary, cur().line);
        next();
        b->name = "and";
        b->args.push_back(std::move(e));
        b->args.push_back(parse_not());
        e = std::move(b);
    }
    return e;
}

ExprPtr Parser::parse_not() {
    if (is_name("not")) {
        DepthGuard g(depth_, *this);
        auto u = make(ExprKind::Unary, cur().line);
        next();
        u->name = "not";
        u->args.push_back(parse_not());
        return u;
    }
    return parse_compare();
}

ExprPtr Parser::parse_compare() {
    ExprPtr first = parse_binary_level(0);
    ExprPtr cmp;
    while (true) {
        std::string op;
        if (cur().type == Tok::Op &&
            (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
             cur().text == ">" || cur().text == ">="))
            op = next().text;
        else if (is_name("in"))
            op = next().text;
        else if (is_name("not") && t_[i_ + 1].type == Tok::Name && t_[i_ + 1].text == "in") {
            i_ += 2;
            op = "not in";
        } else
            break;
        if (!cmp) {
            cmp = make(ExprKind::Compare, first->line);
            cmp->args.push_back(std::move(first));
        }
        cmp->ops.push_back(op);
        cmp->args.push_back(parse_binary_level(0));
    }
    return cmp ? std::move(cmp) : std::move(first);
}

// Levels: 0: + -   1: ~   2: * / // %   3: **   then unary.
ExprPtr Parser::parse_binary_level(int level) {
    static const std::vector<std::vector<std::string>> kOps = {
        {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (level == 4) return parse_unary(true);
    ExprPtr e = parse_binary_level(level + 1);
    while (cur().type == Tok::Op) {
        bool match = false;
        for (const auto& op : kOps[size_t(level)]) match = match || cur().text == op;
        if (!match) break;
        auto b = make(ExprKind::Binary, cur().line);
        b->name = next().text;
        b->args.push_back(std::move(e));
        b->args.push_back(parse_binary_level(level + 1));
        e = std::move(b);
    }
    return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
    DepthGuard g(depth_, *this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
        e = make(ExprKind::Unary, cur().line);
        e->name = next().text;
        e->args.push_back(parse_unary(false));
    } else {
        e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    return with_filter ? parse_filters(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    if (tok.type == Tok::Name) {
        next();
        auto e = make(ExprKind::Literal, line);
        if (tok.text == "true" || tok.text == "True")
            e->value = Value(true);
        else if (tok.text == "false" || tok.text == "False")
            e->value = Value(false);
        else if (tok.text == "none" || tok.text == "None")
            e->value = Value::none();
        else {
            e->kind = ExprKind::Name;
            e->name = tok.text;
        }
        return e;
    }
    if (tok.type == Tok::String) {
        std::string s;
        while (cur().type == Tok::String) s += next().text; // adjacent literals concatenate
        auto e = make(ExprKind::Literal, line);
        e->value = Value(std::move(s));
        return e;
    }
    if (tok.type == Tok::Int || tok.type == Tok::Float) {
        next();
        auto e = make(ExprKind::Literal, line);
        try {
            e->value = tok.type == Tok::Int ? Value(int64_t(std::stoll(tok.text)))
                                            : Value(std::stod(tok.text));
        } catch (const std::exception&) {
            error("number literal out of range: " + tok.text);
        }
        return e;
    }
    if (is_op("(")) return parse_parenthesised(line);
    if (is_op("[") || is_op("{")) return parse_collection(line);
    error(tok.type == Tok::Op ? "unexpected '" + tok.text + "'" : "expected an expression");
}

// ( ) (empty tuple), (x), (x,) and (x, y...).
ExprPtr Parser::parse_parenthesised(int line) {
    next();
    if (is_op(")")) {
        next();
        auto empty = make(ExprKind::ListLit, line);
        empty->negated = true;
        return empty;
    }
    ExprPtr e = parse_expression();
    if (is_op(",")) {
        auto tuple = make(ExprKind::ListLit, line);
        tuple->negated = true;
        tuple->args.push_back(std::move(e));
        while (is_op(",")) {
            next();
            if (is_op(")")) break;
            tuple->args.push_back(parse_expression());
        }
        e = std::move(tuple);
    }
    expect_op(")");
    return e;
}

// [a, b] and {k: v}.
ExprPtr Parser::parse_collection(int line) {
    const bool is_dict = is_op("{");
    next();
    auto e = make(is_dict ? ExprKind::DictLit : ExprKind::ListLit, line);
    const char* close = is_dict ? "}" : "]";
    while (!is_op(close)) {
        if (!e->args.empty()) {
            expect_op(",");
            if (is_op(close)) break;
        }
        e->args.push_back(parse_expression());
        if (is_dict) {
            expect_op(":");
            e->args.push_back(parse_expression());
        }
    }
    next();
    return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
    while (true) {
        const int line = cur().line;
        if (is_op(".")) {
            next();
            if (cur().type == Tok::Int) { // x.0 is x[0]
                auto item = make(ExprKind::Item, line);
                item->args.push_back(std::move(e));
                auto idx = make(ExprKind::Literal, line);
                try {
                    idx->value = Value(int64_t(std::stoll(cur().text)));
                } catch (const std::exception&) {
                    error("index out of range: " + cur().text);
                }
                next();
                item->args.push_back(std::move(idx));
                e = std::move(item);
                continue;
            }
            auto a = make(ExprKind::Attr, line);
            a->name = expect_name();
            a->args.push_back(std::move(e));
            e = std::move(a);
        } else if (is_op("[")) {
            next();
            ExprPtr parts[3];
            int colons = 0;
            while (!is_op("]")) {
                if (is_op(":")) {
                    if (++colons > 2) error("bad slice");
                    next();
                    continue;
                }
                if (parts[colons]) error("expected ']'");
                parts[colons] = parse_expression();
            }
            next();
            auto s = make(colons ? ExprKind::Slice : ExprKind::Item, line);
            if (!colons && !parts[0]) error("empty subscript");
            s->args.push_back(std::move(e));
            for (int k = 0; k < (colons ? 3 : 1); ++k) s->args.push_back(std::move(parts[k]));
            e = std::move(s);
        } else if (is_op("(")) {
            auto c = make(ExprKind::Call, line);
            c->args.push_back(std::move(e));
            parse_call_args(*c);
            e = std::move(c);
        } else {
            return e;
        }
    }
}

void Parser::parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
        if (!first) {
            expect_op(",");
            if (is_op(")")) break;
        }
        first = false;
        if (cur().type == Tok::Name && t_[i_ + 1].type == Tok::Op && t_[i_ + 1].text == "=") {
            std::string key = next().text;
            next();
            call.kwargs.emplace_back(std::move(key), parse_expression());
        } else {
            if (!call.kwargs.empty()) error("positional argument after keyword argument");
            call.args.push_back(parse_expression());
        }
    }
    next();
}

ExprPtr Parser::parse_filters(ExprPtr e) {
    while (true) {
        if (is_op("|")) {
            auto f = make(ExprKind::Filter, cur().line);
            next();
            f->name = expect_name();
            while (is_op(".")) { // dotted filter names
                next();
                f->name.push_back('.');
                f->name += expect_name();
            }
            f->args.push_back(std::move(e));
            if (is_op("(")) parse_call_args(*f);
            e = std::move(f);
        } else if (is_name("is")) {
            e = parse_test(std::move(e));
        } else if (is_op("(")) {
            auto c = make(ExprKind::Call, cur().line);
            c->args.push_back(std::move(e));
            parse_call_args(*c);
            e = std::move(c);
        } else {
            return e;
        }
    }
}

ExprPtr Parser::parse_test(ExprPtr e) {
    auto t = make(ExprKind::Test, cur().line);
    next(); // is
    if (is_name("not")) {
        next();
        t->negated = true;
    }
    t->name = expect_name();
    while (is_op(".")) {
        next();
        t->name.push_back('.');
        t->name += expect_name();
    }
    t->args.push_back(std::move(e));
    if (is_op("(")) {
        parse_call_args(*t);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) error("test argument cannot be 'is'");
        t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
}

} // namespace ninfer::text::jinja::detail
