// A tiny TCP rendezvous: node 0 hands one opaque blob (the NCCL unique id) to every other node
// of a multi-node run (communicator.h, make_nccl_communicators). Wire format per connection:
// 8-byte little-endian length, then the payload; the server closes after sending.
// Plain POSIX sockets, IPv4; no authentication (the launcher's network is trusted, as torchrun's).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace st {

class RendezvousServer {
 public:
  // Binds 0.0.0.0:port (port 0 = any free port, see port()) and listens. IOError naming the port.
  static StatusOr<std::unique_ptr<RendezvousServer>> listen(int port);
  ~RendezvousServer();
  int port() const { return port_; }
  // Sends `payload` to the next `clients` connections; blocks until done. IOError on a socket
  // failure, or when fewer than `clients` connected within timeout_ms.
  Status serve(const std::string& payload, int clients, int timeout_ms);

 private:
  RendezvousServer(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

// Connects to addr:port (retrying until timeout_ms: the server may not be up yet) and reads the
// payload. IOError naming addr:port on timeout or a short read; Corruption on an absurd length.
StatusOr<std::string> rendezvous_fetch(const std::string& addr, int port, int timeout_ms);

}  // namespace st
