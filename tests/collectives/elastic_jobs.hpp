// What the elastic tests share (elastic_test.cpp, grow_test.cpp): a job of ranks in processes of their own
// meeting through a file store or a TcpStore process, a quick heartbeat, and the checks of a group that
// shrank or grew.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/process_group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy::elastic_testing {

using testing::Clock;
using testing::ProcessGroup;
using testing::Reporter;
using testing::require;

// Far below the 20 s call deadline: a rank woken this quickly was woken by the revoke, not the deadline.
inline constexpr auto kQuick = std::chrono::seconds(3);
inline constexpr auto kLimit = std::chrono::seconds(30);  // the whole test's processes, killed after it

// CANOPY_ELASTIC_VERBOSE=1 prints what each rank saw (the messages docs/RELIABILITY.md quotes).
inline void say(const std::string& line) {
  if (std::getenv("CANOPY_ELASTIC_VERBOSE") != nullptr) fmt::print(stderr, "{}\n", line);
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A heartbeat quick enough that a dead rank is left out of a shrink within 1.5 s, set before the fork.
inline void quick_heartbeat(testing::ScopedEnv& env, const std::string& transport) {
  env.set("CANOPY_HEARTBEAT_SECONDS", "0.1").set("CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "1.5");
  env.set("CANOPY_SOCKET_IFNAME", "lo").set("CANOPY_TRANSPORT", transport);
}

// Runs body(rank, reporter, store directory) on `ranks` processes and expects each listed survivor to
// end well; `killed` ranks must have died by SIGKILL.
// The ranks meet through a FileStore, or through a TcpStore in a process of its own (`tcp_store`).
class Job {
 public:
  Job(int ranks, const std::function<void(Communicator&, const Reporter&)>& body, bool tcp_store = false)
      : ranks_(ranks) {
    if (tcp_store) server_ = std::make_unique<testing::StoreServerProcess>("elastic-test");
    const std::string path = dir_.path();
    const std::uint16_t port = server_ ? server_->port() : 0;
    group_ =
        std::make_unique<ProcessGroup>(ranks, [path, port, ranks, body](int rank, const Reporter& reporter) {
          auto store = port != 0
                           ? connect_tcp_store("127.0.0.1", port, "elastic-test", std::chrono::seconds(20))
                           : open_file_store(path);
          Communicator comm(store, rank, ranks, testing::group_options("elastic-test"));
          body(comm, reporter);
        });
  }
  ProcessGroup& group() { return *group_; }
  void expect(const std::vector<int>& killed) {
    std::vector<int> all(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) all[static_cast<std::size_t>(r)] = r;
    if (!group_->wait_ended(all, Clock::now() + kLimit)) group_->kill_unfinished();
    for (int r = 0; r < ranks_; ++r) {
      const testing::ProcessEnd& end = group_->end(r);
      if (std::find(killed.begin(), killed.end(), r) != killed.end())
        EXPECT_EQ(end.signal, SIGKILL) << "rank " << r << " " << end.describe();
      else
        EXPECT_TRUE(end.ok() && end.outcome.rfind("ok", 0) == 0) << "rank " << r << " " << end.describe();
    }
  }

 private:
  int ranks_;
  testing::TempDir dir_;
  std::unique_ptr<testing::StoreServerProcess> server_;
  std::unique_ptr<ProcessGroup> group_;
};

// Back-to-back all-reduces until one fails; returns that error's code.
inline ErrorCode reduce_until_failure(Communicator& comm) {
  std::vector<float> v(4099);
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  try {
    while (Clock::now() < give_up) {
      std::fill(v.begin(), v.end(), 1.0f);
      comm.all_reduce(std::span(v));
      require(v[4098] == static_cast<float>(comm.size()), "all_reduce before the failure: {}", v[4098]);
    }
  } catch (const Error& e) {
    say(fmt::format("[failed] {}", e.what()));
    return e.code();
  }
  throw std::runtime_error("no all_reduce failed within 20 s of the kill");
}

// The sum over `world_ranks` of rank + 1, every element, at a size that pipelines: what a shrunk
// group's all-reduce must give.
inline void check_all_reduce(Communicator& comm, const std::vector<int>& world_ranks, int world_rank) {
  float expected = 0;
  for (int r : world_ranks) expected += static_cast<float>(r + 1);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    std::vector<float> v(count, static_cast<float>(world_rank + 1));
    comm.all_reduce(std::span(v));
    for (std::size_t i = 0; i < count; i += 997)
      require(v[i] == expected, "all_reduce of {} on the shrunk group: element {} is {}, expected {}", count,
              i, v[i], expected);
  }
}

class Elastic : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { quick_heartbeat(env_, GetParam()); }
  testing::ScopedEnv env_;
};

}  // namespace canopy::elastic_testing
