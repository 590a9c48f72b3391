# Writes OUT: a C++ source defining ninfer::server::openapi_document() from the JSON file IN.
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from src/server/openapi.json; do not edit.\n"
     "namespace ninfer::server {\n"
     "const char* openapi_document() {\n"
     "    return R\"ninfer_openapi(${text})ninfer_openapi\";\n"
     "}\n"
     "} // namespace ninfer::server\n")
