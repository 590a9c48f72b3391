# Writes OUT: a C++ source defining ninfer::server::webui_page() from the HTML file IN (the web
# chat page served at /). The page is split into raw string literals of at most 8,000 bytes
# (compilers bound one literal's length; adjacent literals concatenate).
file(READ ${IN} text)
set(delim "ninfer_webui")
string(FIND "${text}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}\"")
endif()
string(LENGTH "${text}" size)
set(body "")
set(pos 0)
while(pos LESS size)
    string(SUBSTRING "${text}" ${pos} 8000 piece)
    string(APPEND body "    R\"${delim}(${piece})${delim}\"\n")
    math(EXPR pos "${pos} + 8000")
endwhile()
file(WRITE ${OUT} "// Generated from src/server/webui/index.html; do not edit.\n"
     "#include <string_view>\n"
     "namespace ninfer::server {\n"
     "std::string_view webui_page() {\n"
     "    static constexpr char page[] =\n${body}    \"\";\n"
     "    return {page, sizeof(page) - 1};\n"
     "}\n"
     "} // namespace ninfer::server\n")
