// The web chat page served at GET / (src/server/webui/index.html, embedded at build time by
// embed_webui.cmake). Internal to src/server.
#pragma once

#include <httplib.h>

#include <string_view>

namespace ninfer::server {

struct ServerState;

// The page: one self-contained HTML document (inline CSS and JS, no third-party code).
std::string_view webui_page();

// GET / (and HEAD /) when options.webui; nothing otherwise, so / is a 404 like any unknown path.
// The page is public: it asks for the API key itself when the API answers 401.
void add_webui_routes(httplib::Server& http, ServerState& s);

} // namespace ninfer::server
