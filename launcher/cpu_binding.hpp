// --bind-to core: each local rank on a CPU of its own, as mpirun binds its ranks by default. posix_spawn
// has no attribute for affinity, but a child inherits its parent thread's: the launcher binds the calling
// thread for the spawn and restores it afterwards.
#pragma once

#include <sched.h>

#include <vector>

namespace canopy::launcher {

// The CPU for local rank `local_rank`: the launcher's allowed CPUs in order, wrapping around when ranks
// outnumber them.
int cpu_for_local_rank(int local_rank, const std::vector<int>& allowed);

// Binds the calling thread to `cpu` until destroyed; Error(System) naming the CPU when the kernel refuses.
class BindCallingThread {
 public:
  explicit BindCallingThread(int cpu);
  ~BindCallingThread();
  BindCallingThread(const BindCallingThread&) = delete;
  BindCallingThread& operator=(const BindCallingThread&) = delete;

 private:
  cpu_set_t previous_{};
};

}  // namespace canopy::launcher
