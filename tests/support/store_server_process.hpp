// A TcpStoreServer in a process of its own, for tests that fork ranks.
//
// A server on a thread of the test process would be running while the test forks its ranks, and a child
// forked while another thread holds a lock (the allocator's, ASan's) inherits that lock held forever: it
// can hang before it says a word. Forked here while the test has no other thread, the server's threads
// live in a process that never forks again.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace canopy::testing {

class StoreServerProcess {
 public:
  // Forks the server (call while this process has no other thread) and waits until it listens on a free
  // loopback port. The server dies with this process (PR_SET_PDEATHSIG) if the test itself dies.
  explicit StoreServerProcess(const std::string& job_token,
                              std::chrono::milliseconds start_limit = std::chrono::seconds(30));
  ~StoreServerProcess();  // kills the server and reaps it
  StoreServerProcess(const StoreServerProcess&) = delete;
  StoreServerProcess& operator=(const StoreServerProcess&) = delete;

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  void stop();

  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace canopy::testing
