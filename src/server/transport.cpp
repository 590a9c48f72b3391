#include "server/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace ninfer::server {
namespace {

using Clock = std::chrono::steady_clock;

int poll_one(int fd, short events, Clock::duration wait) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wait).count();
    pollfd p{fd, events, 0};
    for (;;) {
        const int r = ::poll(&p, 1, int(std::clamp<int64_t>(ms, 0, 1 << 30)));
        if (r >= 0 || errno != EINTR) return r;
    }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    if (r != 0) return;
    char text[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        port = ntohs(in6->sin6_port);
    }
    ip = text;
}

bool& close_requested() {
    thread_local bool close = false;
    return close;
}

// Content-Length (-1: none) and chunked transfer coding of a request head.
void body_framing(const std::string& head, int64_t& content_length, bool& chunked) {
    content_length = -1;
    chunked = false;
    size_t at = head.find("\r\n"); // after the request line
    while (at != std::string::npos && at + 2 < head.size()) {
        const size_t start = at + 2;
        const size_t end = head.find("\r\n", start);
        if (end == std::string::npos) break;
        const size_t colon = head.find(':', start);
        if (colon != std::string::npos && colon < end) {
            std::string name = head.substr(start, colon - start);
            for (char& c : name) c = char(std::tolower(uint8_t(c)));
            std::string value = head.substr(colon + 1, end - colon - 1);
            for (char& c : value) c = char(std::tolower(uint8_t(c)));
            if (name == "content-length") {
                char* stop = nullptr;
                const long long v = std::strtoll(value.c_str(), &stop, 10);
                content_length = v < 0 ? INT64_MAX : int64_t(v); // a bogus length: never drained
            } else if (name == "transfer-encoding" && value.find("chunked") != std::string::npos) {
                chunked = true;
            }
        }
        at = end;
    }
}

// A connection's socket as an httplib::Stream that enforces the request limits. It lives as
// long as the connection (its read buffer may hold the start of a pipelined request);
// begin_request() starts the clock and the byte counts of the next request.
class LimitedStream final : public httplib::Stream {
public:
    LimitedStream(int sock, const TransportLimits& limits, Clock::duration write_timeout)
        : sock_(sock), limits_(limits), write_timeout_(write_timeout),
          body_budget_(limits.max_body_bytes + limits.max_body_bytes / 8 + (64 << 10)) {}

    void begin_request() {
        deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(limits_.request_timeout_s));
        in_headers_ = true;
        tail_ = 0;
        head_.clear();
        header_bytes_ = body_bytes_ = 0;
        transport_failure() = TransportFailure::None;
        close_requested() = false;
    }
    bool failed() const { return transport_failure() != TransportFailure::None; }
    bool buffered() const { return off_ < len_; }

    // After the response: reads what the handler left of the request body (false: the
    // connection cannot carry another request).
    bool finish_request() {
        if (failed() || in_headers_) return false;
        int64_t length;
        bool chunked;
        body_framing(head_, length, chunked);
        if (chunked) return body_bytes_ > 0; // read by the handler, or not at all: close
        char sink[4096];
        while (length > 0 && int64_t(body_bytes_) < length) {
            const size_t want = size_t(std::min<int64_t>(length - int64_t(body_bytes_), 4096));
            if (read(sink, want) <= 0) return false;
        }
        return true;
    }

    bool is_readable() const override {
        return buffered() || poll_one(sock_, POLLIN, deadline_ - Clock::now()) > 0;
    }

    bool is_writable() const override {
        if (poll_one(sock_, POLLOUT, write_timeout_) <= 0) return false;
        // alive unless the peer closed: a readable socket must peek a byte
        if (poll_one(sock_, POLLIN, Clock::duration::zero()) <= 0) return true;
        char c;
        return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
    }

    ssize_t read(char* ptr, size_t size) override {
        if (failed()) return -1;
        if (!buffered()) {
            const auto left = deadline_ - Clock::now();
            const int r = left > Clock::duration::zero() ? poll_one(sock_, POLLIN, left) : 0;
            if (r == 0) return fail(TransportFailure::Timeout);
            if (r < 0) return -1;
            ssize_t n;
            do {
                n = ::recv(sock_, buf_, sizeof(buf_), 0);
            } while (n < 0 && errno == EINTR);
            if (n <= 0) return n;
            off_ = 0;
            len_ = size_t(n);
        }
        const size_t n = std::min(size, len_ - off_);
        size_t i = 0;
        for (; i < n && in_headers_; ++i) { // httplib reads the head a byte at a time
            tail_ = (tail_ << 8) | uint8_t(buf_[off_ + i]);
            head_ += buf_[off_ + i];
            ++header_bytes_;
            if (tail_ == 0x0d0a0d0a) in_headers_ = false; // "\r\n\r\n"
        }
        if (in_headers_ && header_bytes_ > limits_.max_header_bytes)
            return fail(TransportFailure::HeadersTooLarge);
        body_bytes_ += n - i;
        if (body_bytes_ > body_budget_) return fail(TransportFailure::BodyTooLarge);
        std::memcpy(ptr, buf_ + off_, n);
        off_ += n;
        return ssize_t(n);
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do {
            n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        return n;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        address_of(sock_, true, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        address_of(sock_, false, ip, port);
    }
    socket_t socket() const override { return sock_; }

private:
    ssize_t fail(TransportFailure f) {
        transport_failure() = f;
        return -1;
    }

    int sock_;
    const TransportLimits& limits_;
    Clock::duration write_timeout_;
    size_t body_budget_; // wire bytes after the head: the body limit plus chunk framing
    Clock::time_point deadline_{};
    bool in_headers_ = true;
    uint32_t tail_ = 0;
    std::string head_; // the request line and headers, for the body's framing
    size_t header_bytes_ = 0, body_bytes_ = 0;
    char buf_[4096];
    size_t off_ = 0, len_ = 0;
};

} // namespace

void close_after_response() {
    close_requested() = true;
}

TransportFailure& transport_failure() {
    thread_local TransportFailure failure = TransportFailure::None;
    return failure;
}

int transport_status(TransportFailure f) {
    switch (f) {
    case TransportFailure::Timeout:
        return 408;
    case TransportFailure::HeadersTooLarge:
        return 431;
    case TransportFailure::BodyTooLarge:
        return 413;
    case TransportFailure::None:
        break;
    }
    return 400;
}

std::string transport_message(TransportFailure f, const TransportLimits& limits) {
    switch (f) {
    case TransportFailure::Timeout:
        return "the request was not received within " +
               std::to_string(int(limits.request_timeout_s)) + " s (--read-timeout)";
    case TransportFailure::HeadersTooLarge:
        return "the request headers are larger than " + std::to_string(limits.max_header_bytes) +
               " bytes";
    case TransportFailure::BodyTooLarge:
        return "the request body is larger than the server accepts";
    case TransportFailure::None:
        break;
    }
    return "malformed HTTP request";
}

void HardenedServer::widen_backlog() {
    const socket_t sock = svr_sock_;
    if (sock != INVALID_SOCKET) ::listen(sock, SOMAXCONN); // re-listening updates the backlog
}

bool HardenedServer::process_and_close_socket(socket_t sock) {
    const auto write_timeout = std::chrono::duration_cast<Clock::duration>(
        std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_));
    LimitedStream strm(sock, limits_, write_timeout);
    bool ret = false, linger = false;
    for (size_t count = keep_alive_max_count_; count > 0; --count) {
        // Idle keep-alive wait (for the first request too), ended early by stop().
        bool ready = strm.buffered();
        const auto idle_end = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
        while (!ready && svr_sock_ != INVALID_SOCKET && Clock::now() < idle_end) {
            const auto slice =
                std::min<Clock::duration>(idle_end - Clock::now(), std::chrono::milliseconds(100));
            const int r = poll_one(sock, POLLIN, slice);
            if (r < 0) break;
            ready = r > 0;
        }
        if (!ready || svr_sock_ == INVALID_SOCKET) break;
        strm.begin_request();
        bool closed = false;
        ret = process_request(strm, count == 1, closed, {});
        if (!ret || closed) break;
        if (close_requested() || !strm.finish_request()) {
            linger = true; // the client may still be sending the refused request
            break;
        }
    }
    transport_failure() = TransportFailure::None;
    close_requested() = false;
    if (linger) {
        // Closing a socket with unread input resets the connection, and the client may lose
        // the error response it was sent: stop writing, then read what the client still sends
        // (bounded) until it closes.
        ::shutdown(sock, SHUT_WR);
        const auto end = Clock::now() + std::chrono::seconds(2);
        char sink[4096];
        for (size_t drained = 0; drained < (4u << 20) && Clock::now() < end;) {
            if (poll_one(sock, POLLIN, end - Clock::now()) <= 0) break;
            const ssize_t n = ::recv(sock, sink, sizeof(sink), 0);
            if (n <= 0) break;
            drained += size_t(n);
        }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
}

} // namespace ninfer::server
