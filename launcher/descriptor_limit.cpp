#include "launcher/descriptor_limit.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/fd_limit.hpp"
#include "common/log.hpp"

namespace canopy::launcher {
namespace {

// The kernel's default for fs.nr_open, for a system whose /proc cannot be read.
constexpr rlim_t kDefaultNrOpen = 1 << 20;

rlim_t read_nr_open() {
  std::FILE* file = std::fopen("/proc/sys/fs/nr_open", "re");
  if (file == nullptr) return kDefaultNrOpen;
  unsigned long long value = 0;
  const bool read = std::fscanf(file, "%llu", &value) == 1 && value > 0;
  std::fclose(file);
  return read ? static_cast<rlim_t>(value) : kDefaultNrOpen;
}

}  // namespace

rlim_t descriptor_limit_target(rlim_t hard, rlim_t nr_open) {
  return hard == RLIM_INFINITY ? nr_open : hard;
}

DescriptorLimitRaise raise_descriptor_limit() {
  DescriptorLimitRaise raise;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    raise.problem = fmt::format("getrlimit: {}", std::strerror(errno));
    log::info("canopy-run: cannot read the ranks' file descriptor limit (RLIMIT_NOFILE): {}", raise.problem);
    return raise;
  }
  raise.before = raise.after = limit.rlim_cur;
  const rlim_t target = descriptor_limit_target(limit.rlim_max, read_nr_open());
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= target) return raise;
  rlimit raised = limit;
  raised.rlim_cur = target;
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    raise.problem = fmt::format("setrlimit to {}: {}", limit_text(target), std::strerror(errno));
    log::info("canopy-run: cannot raise the ranks' file descriptor limit (RLIMIT_NOFILE) from {}: {}",
              limit_text(limit.rlim_cur), raise.problem);
    return raise;
  }
  raise.after = target;
  log::info("canopy-run: raised the ranks' file descriptor limit (RLIMIT_NOFILE) from {} to {}, {}",
            limit_text(limit.rlim_cur), limit_text(target),
            limit.rlim_max == RLIM_INFINITY ? "the kernel's ceiling (fs.nr_open; the hard limit is unlimited)"
                                            : "the hard limit");
  return raise;
}

}  // namespace canopy::launcher
