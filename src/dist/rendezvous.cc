#include "dist/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace st {
namespace {

constexpr uint64_t kMaxPayload = 1 << 20;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status write_all(int fd, const char* p, size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoError("rendezvous: sending to " + what);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status read_all(int fd, char* p, size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("rendezvous: reading from " + what);
    if (r == 0) return IOError("rendezvous: " + what + " closed the connection early");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

// IPv4 address of a host name or dotted quad.
StatusOr<in_addr> resolve(const std::string& addr) {
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(addr.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) return IOError("rendezvous: cannot resolve MASTER_ADDR '" + addr + "': " + gai_strerror(rc));
  a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return a;
}

}  // namespace

StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::listen(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("rendezvous: socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 64) != 0) {
    Status s = ErrnoError(Str() << "rendezvous: binding port " << port);
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(fd, ntohs(sa.sin_port)));
}

RendezvousServer::~RendezvousServer() { ::close(fd_); }

Status RendezvousServer::serve(const std::string& payload, int clients, int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  char hdr[8];
  uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) hdr[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  for (int served = 0; served < clients;) {
    pollfd p{fd_, POLLIN, 0};
    const int64_t left = deadline - now_ms();
    const int rc = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0)
      return IOError(Str() << "rendezvous: only " << served << " of " << clients << " nodes connected to port "
                           << port_ << " within " << timeout_ms << " ms");
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    const std::string who = Str() << "node on port " << port_;
    Status s = write_all(c, hdr, 8, who);
    if (s.ok()) s = write_all(c, payload.data(), payload.size(), who);
    ::close(c);
    RETURN_IF_ERROR(s);
    ++served;
  }
  return Status::OK();
}

StatusOr<std::string> rendezvous_fetch(const std::string& addr, int port, int timeout_ms) {
  ASSIGN_OR_RETURN(in_addr ip, resolve(addr));
  const std::string who = Str() << addr << ":" << port;
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoError("rendezvous: socket");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = ip;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      char hdr[8];
      Status s = read_all(fd, hdr, 8, who);
      uint64_t n = 0;
      for (int i = 0; i < 8 && s.ok(); ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(hdr[i])) << (8 * i);
      if (s.ok() && n > kMaxPayload) s = Corruption(Str() << "rendezvous: " << who << " announced " << n << " bytes");
      std::string out(s.ok() ? n : 0, '\0');
      if (s.ok()) s = read_all(fd, out.data(), n, who);
      ::close(fd);
      RETURN_IF_ERROR(s);
      return out;
    }
    ::close(fd);
    if (now_ms() >= deadline) return IOError("rendezvous: could not reach node 0 at " + who + " (MASTER_ADDR/MASTER_PORT)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace st
