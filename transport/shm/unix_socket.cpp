#include "transport/shm/unix_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "common/error.hpp"
#include "common/fd_limit.hpp"

namespace canopy::transport {
namespace {

// The abstract address of `name`: a leading NUL, then the name (no terminator; the length says where it
// ends).
socklen_t abstract_address(const std::string& name, sockaddr_un& address) {
  if (name.empty() || name.size() + 1 > sizeof(address.sun_path))
    fail(ErrorCode::InvalidArgument, "shared memory: '{}' is not a usable socket name", name);
  address = {};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

UniqueFd packet_socket(std::string_view need) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail_descriptor_call("shared memory: socket(AF_UNIX, SOCK_SEQPACKET)", errno, need);
  return fd;
}

void make_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    fail_errno("shared memory: fcntl O_NONBLOCK");
}

}  // namespace

UniqueFd listen_unix(int backlog, std::string& name, std::string_view need) {
  UniqueFd fd = packet_socket(need);
  std::random_device entropy;
  name = fmt::format("canopy-{}-{:08x}{:08x}", ::getpid(), entropy(), entropy());
  sockaddr_un address;
  socklen_t length = abstract_address(name, address);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0)
    fail_errno(fmt::format("shared memory: bind of the abstract socket '{}'", name));
  if (::listen(fd.get(), backlog) != 0) fail_errno("shared memory: listen");
  make_nonblocking(fd.get());
  return fd;
}

UniqueFd connect_unix(const std::string& name, int& error, std::string_view need) {
  UniqueFd fd = packet_socket(need);
  sockaddr_un address;
  socklen_t length = abstract_address(name, address);
  // Blocking: a Unix connect completes at once (the listener's backlog queues it) or fails at once.
  while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == EINTR) continue;
    error = errno;
    return {};
  }
  error = 0;
  make_nonblocking(fd.get());
  return fd;
}

int send_packet(int fd, std::span<const std::byte> bytes, int pass) {
  iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &pass, sizeof(int));
  }
  for (;;) {
    if (::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

long receive_packet(int fd, std::span<std::byte> bytes, UniqueFd& received) {
  iovec iov{bytes.data(), bytes.size()};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t n = 0;
  do {
    n = ::recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      // One is expected; any other is closed at once, never left open.
      if (!received.valid())
        received = UniqueFd(passed);
      else
        ::close(passed);
    }
  }
  if ((message.msg_flags & MSG_CTRUNC) != 0 && !received.valid()) {
    // The kernel drops a passed descriptor this process has no room for: say so, not "no doorbell".
    const int probe = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    const int err = errno;
    if (probe >= 0) ::close(probe);
    if (probe < 0 && out_of_descriptors(err))
      fail_descriptor_call("shared memory: receiving a descriptor from a peer", err);
  }
  if ((message.msg_flags & MSG_TRUNC) != 0) return -EMSGSIZE;
  return static_cast<long>(n);
}

namespace {

bool peer_credentials(int fd, ucred& credentials) {
  socklen_t length = sizeof(credentials);
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0;
}

}  // namespace

uid_t peer_user(int fd) {
  ucred credentials{};
  return peer_credentials(fd, credentials) ? credentials.uid : static_cast<uid_t>(-1);
}

pid_t peer_process(int fd) {
  ucred credentials{};
  return peer_credentials(fd, credentials) ? credentials.pid : 0;
}

bool wait_readable(int fd, Deadline deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;
    if (ready == 0 && deadline.expired()) return false;
    if (ready < 0 && errno != EINTR) fail_errno("poll");
  }
}

}  // namespace canopy::transport
