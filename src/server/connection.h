// Notices a client that went away while its request is still being computed. cpp-httplib does
// not hand the socket to handlers, so the probe finds it by its addresses: the process's one
// socket whose local and peer addresses are those of the request (Linux /proc/self/fd).
#pragma once

#include <string>

namespace ninfer::server {

class ConnectionProbe {
public:
    ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr,
                    int remote_port);
    // True once the peer closed or reset the connection (never blocks).
    bool closed();

private:
    int find_fd() const;
    std::string local_addr_, remote_addr_;
    int local_port_, remote_port_;
    int fd_ = -1;
    bool searched_ = false;
};

} // namespace ninfer::server
