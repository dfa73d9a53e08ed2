// A rank that runs out of file descriptors while an 8-rank group forms its whole mesh over TCP
// (CANOPY_CONNECT=eager): it gets Error(Resource) at once, naming its limit and what its mesh needs, and
// every other rank gets a clear error within the group's deadline; nobody hangs.
#include "common/fd_limit.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/process_group.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy::reliability {
namespace {

using testing::Clock;
using testing::ProcessEnd;
using testing::ProcessGroup;
using testing::Reporter;

constexpr int kRanks = 8;
constexpr auto kDeadline = std::chrono::seconds(4);  // the group's CANOPY_TIMEOUT
// Descriptors the starved rank may open beyond those it has: a listener and 3 peers, of its 7.
constexpr int kRoom = 4;

// "resource", "timeout": the error code as one word.
std::string code_word(ErrorCode code) {
  std::string word(to_string(code));
  std::replace(word.begin(), word.end(), ' ', '_');
  return word;
}

// One rank's last word: "<code> <soft limit set or 0> <seconds>|<message>".
struct Outcome {
  std::string code;
  rlim_t soft = 0;
  double seconds = 0;
  std::string message;
};

Outcome parse(const ProcessEnd& end) {
  Outcome outcome;
  const std::string& line = end.outcome;
  const auto bar = line.find('|');
  char code[32] = {};
  unsigned long long soft = 0;
  std::sscanf(line.substr(0, bar).c_str(), "%31s %llu %lf", code, &soft, &outcome.seconds);
  outcome.code = code;
  outcome.soft = static_cast<rlim_t>(soft);
  if (bar != std::string::npos) outcome.message = line.substr(bar + 1);
  return outcome;
}

// Forms an 8-rank communicator over `transport` (CANOPY_TRANSPORT) in which rank `starved` may open only
// kRoom more descriptors; returns how each rank ended. `at_first_call`: the links are made on first use,
// and the starved rank may open no descriptor once the group formed, then all run a ring all-reduce.
std::vector<Outcome> form_with_a_starved_rank(int starved, const std::string& transport = "tcp",
                                              int room = kRoom, bool at_first_call = false) {
  testing::ScopedEnv env;
  // Every link at once, while the group forms: with links on first use, forming needs only a listener.
  env.set("CANOPY_TRANSPORT", transport).set("CANOPY_SOCKET_IFNAME", "lo");
  env.set("CANOPY_CONNECT", at_first_call ? "lazy" : "eager");
  const std::string token = "fd-limit-test";
  testing::StoreServerProcess server(token);
  const std::uint16_t port = server.port();
  ProcessGroup group(kRanks, [&](int rank, const Reporter& reporter) {
    auto store = connect_tcp_store("127.0.0.1", port, token, std::chrono::seconds(10));
    rlimit limit{};
    auto starve = [&](int more) {
      ::getrlimit(RLIMIT_NOFILE, &limit);
      limit.rlim_cur = static_cast<rlim_t>(open_descriptor_count() + more);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    };
    if (rank == starved && !at_first_call) starve(room);
    auto start = Clock::now();
    std::string outcome;
    try {
      Communicator comm(store, rank, kRanks, testing::group_options(token, kDeadline));
      if (at_first_call) {
        if (rank == starved) starve(0);
        start = Clock::now();
        std::vector<float> data(4, 1.0f);
        comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = "ring"});
      }
      outcome = "ok";
    } catch (const Error& e) {
      outcome = code_word(e.code());
      std::string message = e.what();
      std::replace(message.begin(), message.end(), '\n', ' ');
      outcome += fmt::format(" {} {:.2f}|{}", static_cast<unsigned long long>(limit.rlim_cur),
                             std::chrono::duration<double>(Clock::now() - start).count(), message);
    }
    reporter.outcome(outcome);
  });
  std::vector<int> all(kRanks);
  std::iota(all.begin(), all.end(), 0);
  const bool ended = group.wait_ended(all, Clock::now() + std::chrono::seconds(60));
  group.kill_unfinished();
  EXPECT_TRUE(ended) << "a rank hung";
  std::vector<Outcome> outcomes;
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(group.end(rank).ended && !group.end(rank).timed_out)
        << "rank " << rank << " " << group.end(rank).describe();
    outcomes.push_back(parse(group.end(rank)));
  }
  return outcomes;
}

void check(const std::vector<Outcome>& outcomes, int starved) {
  const Outcome& mine = outcomes[starved];
  const Outcome& neighbour = outcomes[(starved + 1) % kRanks];
  fmt::print("[fd-limit] rank {} after {:.2f} s: {}: {}\n[fd-limit] rank {} after {:.2f} s: {}: {}\n",
             starved, mine.seconds, mine.code, mine.message, (starved + 1) % kRanks, neighbour.seconds,
             neighbour.code, neighbour.message);
  EXPECT_EQ(mine.code, "resource_limit") << mine.message;
  EXPECT_NE(mine.message.find(
                fmt::format("RLIMIT_NOFILE is {} (soft)", static_cast<unsigned long long>(mine.soft))),
            std::string::npos)
      << mine.message;
  // Both meshes of the communicator, on the listener they share: 2 x 7 sockets, the listener, 4 eventfds.
  EXPECT_NE(mine.message.find(fmt::format("rank {}'s 2 TCP meshes of {} ranks", starved, kRanks)),
            std::string::npos)
      << mine.message;
  EXPECT_NE(mine.message.find("need 19 descriptors"), std::string::npos) << mine.message;
  EXPECT_NE(mine.message.find("ulimit -n"), std::string::npos) << mine.message;
  EXPECT_LT(mine.seconds, std::chrono::duration<double>(kDeadline).count())
      << "not at once: " << mine.message;
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank == starved) continue;
    const Outcome& other = outcomes[rank];
    EXPECT_TRUE(other.code == "timeout" || other.code == "peer_failed")
        << "rank " << rank << ": " << other.code << " " << other.message;
    EXPECT_LT(other.seconds, std::chrono::duration<double>(kDeadline).count() + 5) << "rank " << rank;
  }
}

// Rank 5 runs out while it connects to the lower ranks (socket() fails).
TEST(OutOfDescriptors, ARankOutOfDescriptorsWhileConnectingGetsAResourceError) {
  constexpr int kStarved = 5;
  check(form_with_a_starved_rank(kStarved), kStarved);
}

// Rank 0 runs out while it accepts the higher ranks (accept() fails): no spin on the ready listener.
TEST(OutOfDescriptors, ARankOutOfDescriptorsWhileAcceptingGetsAResourceError) {
  constexpr int kStarved = 0;
  check(form_with_a_starved_rank(kStarved), kStarved);
}

// Over shared memory (after the TCP mesh, which fits): a socket, and a doorbell passed by a peer.
TEST(OutOfDescriptors, ARankOutOfDescriptorsForSharedMemoryGetsAResourceError) {
  constexpr int kStarved = 5;
  for (int room : {12, 16}) {
    const Outcome mine = form_with_a_starved_rank(kStarved, "shm+tcp", room)[kStarved];
    fmt::print("[fd-limit] room {}: rank {} after {:.2f} s: {}: {}\n", room, kStarved, mine.seconds,
               mine.code, mine.message);
    EXPECT_EQ(mine.code, "resource_limit") << mine.message;
    EXPECT_NE(mine.message.find("shared memory: "), std::string::npos) << mine.message;
    EXPECT_NE(mine.message.find(
                  fmt::format("RLIMIT_NOFILE is {} (soft)", static_cast<unsigned long long>(mine.soft))),
              std::string::npos)
        << mine.message;
  }
}

// With links on first use forming opens no shared-memory link of rank 5 but its link with rank 0 (the host
// cells'): its first all-reduce, which needs 2 more, meets the limit, with the same clear error.
TEST(OutOfDescriptors, OnFirstUseARankOutOfDescriptorsAtItsFirstCallGetsAResourceError) {
  constexpr int kStarved = 5;
  const std::vector<Outcome> outcomes = form_with_a_starved_rank(kStarved, "shm+tcp", 0, true);
  const Outcome& mine = outcomes[kStarved];
  fmt::print("[fd-limit] first call: rank {} after {:.2f} s: {}: {}\n", kStarved, mine.seconds, mine.code,
             mine.message);
  EXPECT_EQ(mine.code, "resource_limit") << mine.message;
  EXPECT_NE(mine.message.find("shared memory"), std::string::npos) << mine.message;
  EXPECT_NE(mine.message.find(
                fmt::format("RLIMIT_NOFILE is {} (soft)", static_cast<unsigned long long>(mine.soft))),
            std::string::npos)
      << mine.message;
  EXPECT_LT(mine.seconds, std::chrono::duration<double>(kDeadline).count())
      << "not at once: " << mine.message;
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != kStarved) {
      EXPECT_NE(outcomes[rank].code, "ok") << "rank " << rank << " finished a ring all-reduce without rank 5";
    }
  }
}

}  // namespace
}  // namespace canopy::reliability
