// Jinja lexer with the whitespace rules of jinja2 as HF chat templates configure it
// (trim_blocks, lstrip_blocks, no trailing newline kept): `{%- -%}` strip, `{%+` keeps.
#pragma once

#include <string>
#include <vector>

namespace ninfer::text::jinja {

enum class Tok {
    Text,       // template data
    VarBegin,   // {{
    VarEnd,     // }}
    BlockBegin, // {%
    BlockEnd,   // %}
    Name,
    String,
    Int,
    Float,
    Op, // operators and punctuation: + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
    End,
};

struct Token {
    Tok type;
    std::string text; // Text data, name, decoded string, number literal or operator
    int line;
};

// Raises ninfer::Error (InvalidArgument) with the line on unterminated tags, strings or
// comments and on characters that are not Jinja syntax.
std::vector<Token> lex(const std::string& source);

} // namespace ninfer::text::jinja
