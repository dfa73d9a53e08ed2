#include "launcher/torch_port.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.hpp"

namespace canopy::launcher {
namespace {

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail_errno("canopy-run: cannot open a socket to find a free port for torch's MASTER_PORT");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int err = errno;
    ::close(fd);
    fail_errno("canopy-run: cannot find a free port for torch's MASTER_PORT", err);
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

std::uint16_t torch_master_port(const LaunchOptions& options, std::uint16_t store_port) {
  if (options.nnodes == 1) return free_port();
  if (store_port == 65535)
    fail(ErrorCode::Config,
         "--master-port 65535 leaves no port above it for torch's MASTER_PORT; choose a lower one");
  return static_cast<std::uint16_t>(store_port + 1);
}

}  // namespace canopy::launcher
