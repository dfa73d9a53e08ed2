#include "launcher/console.hpp"

#include <poll.h>

#include <cerrno>

namespace canopy::launcher {

void write_fully(int fd, std::string_view text) {
  // A sink that inherited O_NONBLOCK may refuse for a while; a full minute of refusal means nobody reads it.
  int refusals_left = 600;
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && refusals_left-- > 0) {
      pollfd waiter{fd, POLLOUT, 0};
      ::poll(&waiter, 1, 100);
      continue;
    }
    return;  // EPIPE, a closed descriptor, a full disk: the text is lost, the job goes on
  }
}

}  // namespace canopy::launcher
