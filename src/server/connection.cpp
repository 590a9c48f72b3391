#include "server/connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace ninfer::server {
namespace {

bool same_address(const sockaddr_storage& a, const std::string& addr, int port) {
    char text[INET6_ADDRSTRLEN] = {0};
    int p = -1;
    if (a.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        p = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
        p = ntohs(in6->sin6_port);
    } else {
        return false;
    }
    return p == port && addr == text;
}

} // namespace

ConnectionProbe::ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr,
                                 int remote_port)
    : local_addr_(std::move(local_addr)), remote_addr_(std::move(remote_addr)),
      local_port_(local_port), remote_port_(remote_port) {}

int ConnectionProbe::find_fd() const {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1;
    while (dirent* e = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        struct stat st {};
        if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage local{}, peer{};
        socklen_t ll = sizeof(local), pl = sizeof(peer);
        if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
        if (same_address(local, local_addr_, local_port_) &&
            same_address(peer, remote_addr_, remote_port_)) {
            found = int(fd);
            break;
        }
    }
    closedir(dir);
    return found;
}

bool ConnectionProbe::closed() {
    if (!searched_) {
        fd_ = find_fd();
        searched_ = true;
    }
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) { // readable: a pipelined request, or the end of the stream
        char c;
        const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;
    }
    return false;
}

} // namespace ninfer::server
