// GET /: the web chat page. It is served without the API key (it holds no data; every API call
// it makes carries the key the user gives it), with headers that keep it self-contained: no
// caching of a stale page across upgrades, no framing, no sniffing, and a content security
// policy that allows its own inline code, data:/blob: images and requests to this origin only.
#include "server/routes_webui.h"

#include <string>

#include "server/server_state.h"

namespace ninfer::server {

void add_webui_routes(httplib::Server& http, ServerState& s) {
    if (!s.options.webui) return;
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        const std::string_view page = webui_page();
        res.set_content(std::string(page), "text/html; charset=utf-8");
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("X-Frame-Options", "DENY");
        res.set_header("Referrer-Policy", "no-referrer");
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                       "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; "
                       "form-action 'none'; frame-ancestors 'none'");
    });
}

} // namespace ninfer::server
