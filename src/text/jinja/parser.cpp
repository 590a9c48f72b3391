#include "text/jinja/parser_impl.h"

namespace ninfer::text::jinja {
namespace detail {

std::pair<Body, std::string> Parser::parse_body(const std::set<std::string>& ends) {
    DepthGuard g(depth_, *this);
    Body body;
    while (true) {
        const Token& tok = cur();
        if (tok.type == Tok::End) {
            if (!ends.empty()) error("missing end tag (one of: " + *ends.begin() + ")");
            return {std::move(body), ""};
        }
        if (tok.type == Tok::Text) {
            auto s = std::make_unique<Stmt>();
            s->kind = StmtKind::Text;
            s->line = tok.line;
            s->text = tok.text;
            body.push_back(std::move(s));
            next();
        } else if (tok.type == Tok::VarBegin) {
            next();
            auto s = std::make_unique<Stmt>();
            s->kind = StmtKind::Output;
            s->line = tok.line;
            s->expr = parse_expression();
            if (cur().type != Tok::VarEnd) error("expected end of print statement '}}'");
            next();
            body.push_back(std::move(s));
        } else if (tok.type == Tok::BlockBegin) {
            const Token& name = t_[i_ + 1];
            if (name.type == Tok::Name && ends.count(name.text)) {
                i_ += 2;
                return {std::move(body), name.text};
            }
            next();
            body.push_back(parse_statement());
        } else {
            error("unexpected '" + tok.text + "'");
        }
    }
}

std::unique_ptr<Stmt> Parser::parse_statement() {
    const int line = cur().line;
    const std::string tag = expect_name();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "break" || tag == "continue") {
        s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
        expect_block_end();
        return s;
    }
    if (tag == "generation") {
        s->kind = StmtKind::Scope;
        expect_block_end();
        s->body = parse_body({"endgeneration"}).first;
        expect_block_end();
        return s;
    }
    i_ -= 1;
    error("unknown or unsupported tag '" + tag + "'");
}

std::unique_ptr<Stmt> Parser::parse_if(int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::If;
    s->line = line;
    ExprPtr cond = parse_expression();
    while (true) {
        expect_block_end();
        auto [body, end] = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
            cond = parse_expression();
            continue;
        }
        if (end == "else") {
            expect_block_end();
            s->else_body = parse_body({"endif"}).first;
        }
        expect_block_end();
        return s;
    }
}

std::unique_ptr<Stmt> Parser::parse_for(int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::For;
    s->line = line;
    s->targets.push_back(expect_name());
    while (is_op(",")) {
        next();
        s->targets.push_back(expect_name());
    }
    if (!is_name("in")) error("expected 'in' in for loop");
    next();
    s->expr = parse_expression(false);
    if (is_name("if")) {
        next();
        s->filter = parse_expression();
    }
    if (is_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    auto [body, end] = parse_body({"else", "endfor"});
    s->body = std::move(body);
    if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}).first;
    }
    expect_block_end();
    return s;
}

std::unique_ptr<Stmt> Parser::parse_set(int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Set;
    s->line = line;
    s->targets.push_back(expect_name());
    if (is_op(".")) {
        next();
        s->attr = expect_name();
    } else {
        while (is_op(",")) {
            next();
            s->targets.push_back(expect_name());
        }
    }
    if (cur().type == Tok::BlockEnd && s->targets.size() == 1 && s->attr.empty()) {
        next();
        s->kind = StmtKind::SetBlock;
        s->body = parse_body({"endset"}).first;
        expect_block_end();
        return s;
    }
    expect_op("=");
    ExprPtr value = parse_expression();
    if (is_op(",")) { // a tuple: set x = a, b
        auto tuple = make(ExprKind::ListLit, line);
        tuple->negated = true;
        tuple->args.push_back(std::move(value));
        while (is_op(",")) {
            next();
            tuple->args.push_back(parse_expression());
        }
        value = std::move(tuple);
    }
    s->expr = std::move(value);
    expect_block_end();
    return s;
}

std::unique_ptr<Stmt> Parser::parse_macro(int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::Macro;
    s->line = line;
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
        if (!s->params.empty()) expect_op(",");
        std::string name = expect_name();
        ExprPtr def;
        if (is_op("=")) {
            next();
            def = parse_expression();
        }
        s->params.emplace_back(std::move(name), std::move(def));
    }
    next();
    expect_block_end();
    s->body = parse_body({"endmacro"}).first;
    if (cur().type == Tok::Name) next(); // {% endmacro name %}
    expect_block_end();
    return s;
}

} // namespace detail

Body parse(const std::vector<Token>& tokens) {
    return detail::Parser(tokens).parse_template();
}

} // namespace ninfer::text::jinja
