// Jinja parser: tokens -> syntax tree. Syntax errors raise ninfer::Error (InvalidArgument)
// naming the template line.
#pragma once

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace ninfer::text::jinja {

Body parse(const std::vector<Token>& tokens);

} // namespace ninfer::text::jinja
