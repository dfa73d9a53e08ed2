#include "launcher/job_token.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>

#include "common/error.hpp"

namespace canopy::launcher {

std::string generate_job_token() {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open /dev/urandom for the job token");
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail_errno("cannot read /dev/urandom for the job token", err);
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);

  constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 0xf]);
  }
  return token;
}

}  // namespace canopy::launcher
