#include "launcher/cpu_binding.hpp"

#include "common/error.hpp"

namespace canopy::launcher {

int cpu_for_local_rank(int local_rank, const std::vector<int>& allowed) {
  return allowed[static_cast<std::size_t>(local_rank) % allowed.size()];
}

BindCallingThread::BindCallingThread(int cpu) {
  if (::sched_getaffinity(0, sizeof(previous_), &previous_) != 0) fail_errno("sched_getaffinity");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (::sched_setaffinity(0, sizeof(one), &one) != 0)
    fail_errno(fmt::format("cannot bind a rank to CPU {}", cpu));
}

BindCallingThread::~BindCallingThread() {
  ::sched_setaffinity(0, sizeof(previous_), &previous_);
}

}  // namespace canopy::launcher
