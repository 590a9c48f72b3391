// The connection loop under cpp-httplib's request parser, with the limits the library (0.11)
// lacks: a deadline for receiving a whole request (headers and body: a client that trickles
// bytes, or stops sending, is answered 408 and disconnected), a cap on the header bytes (431:
// the library would grow its header table without bound) and a cap on the bytes a request body
// may take on the wire (chunked bodies bypass the library's payload limit). A body the library
// leaves unread (GET, unknown methods) is drained, so the next request on a keep-alive connection
// starts where it should. Requests are otherwise parsed, routed and answered by httplib::Server.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

namespace ninfer::server {

struct TransportLimits {
    double request_timeout_s = 30;      // first byte of a request to its last body byte
    size_t max_header_bytes = 64 << 10; // request line and headers
    size_t max_body_bytes = 8u << 20;   // the body as the handlers see it
};

// Why the transport refused the current request (read by the error handler on the same
// thread); None when the request was read whole.
enum class TransportFailure { None, Timeout, HeadersTooLarge, BodyTooLarge };
TransportFailure& transport_failure();

// Closes the connection once the current response is written (a malformed request: what
// follows it on the connection cannot be trusted to start a request).
void close_after_response();

class HardenedServer : public httplib::Server {
public:
    // Set before listening.
    void set_limits(const TransportLimits& limits) { limits_ = limits; }
    // After binding: a listen backlog for bursts of connections (cpp-httplib 0.11 asks for 5;
    // a burst beyond it gets connections reset under SYN cookies).
    void widen_backlog();
    const TransportLimits& limits() const { return limits_; }

private:
    bool process_and_close_socket(socket_t sock) override;
    TransportLimits limits_;
};

// The status and message of a transport failure (408, 431, 413).
int transport_status(TransportFailure f);
std::string transport_message(TransportFailure f, const TransportLimits& limits);

} // namespace ninfer::server
