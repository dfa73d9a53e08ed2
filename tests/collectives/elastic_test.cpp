// Losing a rank and going on, between real processes: revoke wakes every rank's call with
// Error(Revoked), agree returns the same AND on every survivor, shrink gives the survivors a smaller
// communicator whose all-reduces are right, over TCP and over shared memory, even when a second rank
// dies during the shrink, and grow admits a process started later (a replacement). Ranks die by SIGKILL (no destructor runs). Every wait is bounded: a rank that
// has not ended by its limit is killed and fails the test.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/process_group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::ProcessGroup;
using testing::Reporter;
using testing::require;

// Far below the 20 s call deadline: a rank woken this quickly was woken by the revoke, not the deadline.
constexpr auto kQuick = 3s;
constexpr auto kLimit = 30s;  // the whole test's processes, killed after it

// CANOPY_ELASTIC_VERBOSE=1 prints what each rank saw (the messages docs/RELIABILITY.md quotes).
void say(const std::string& line) {
  if (std::getenv("CANOPY_ELASTIC_VERBOSE") != nullptr) fmt::print(stderr, "{}\n", line);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A heartbeat quick enough that a dead rank is left out of a shrink within 1.5 s, set before the fork.
void quick_heartbeat(testing::ScopedEnv& env, const std::string& transport) {
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
    group_ = std::make_unique<ProcessGroup>(ranks, [path, port, ranks, body](int rank, const Reporter& reporter) {
      auto store = port != 0 ? connect_tcp_store("127.0.0.1", port, "elastic-test", 20s) : open_file_store(path);
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
ErrorCode reduce_until_failure(Communicator& comm) {
  std::vector<float> v(4099);
  const auto give_up = Clock::now() + 20s;
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
void check_all_reduce(Communicator& comm, const std::vector<int>& world_ranks, int world_rank) {
  float expected = 0;
  for (int r : world_ranks) expected += static_cast<float>(r + 1);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    std::vector<float> v(count, static_cast<float>(world_rank + 1));
    comm.all_reduce(std::span(v));
    for (std::size_t i = 0; i < count; i += 997)
      require(v[i] == expected, "all_reduce of {} on the shrunk group: element {} is {}, expected {}", count, i,
              v[i], expected);
  }
}

class Elastic : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { quick_heartbeat(env_, GetParam()); }
  testing::ScopedEnv env_;
};

// Rank 0 revokes while ranks 1-3 wait in an all-reduce that needs it: they wake with Error(Revoked) naming
// the call and the revoker, far before the deadline; every later call on any rank says revoked too.
TEST_P(Elastic, RevokeWakesABlockedAllReduceOnEveryRank) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    comm.agree(1);  // everyone is up
    std::vector<float> v(1000, 1.0f);
    const auto start = Clock::now();
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(200ms);  // the others are waiting in the all-reduce by now
      comm.revoke("rank 0 found a failure");
    } else {
      try {
        comm.all_reduce(std::span(v));
        require(false, "the all-reduce succeeded without rank 0");
      } catch (const Error& e) {
        const std::string what = e.what();
        say(fmt::format("[revoked after {:.3f} s] {}", seconds_since(start), what));
        require(e.code() == ErrorCode::Revoked, "{}: {}", to_string(e.code()), what);
        require(what.find("all_reduce #") != std::string::npos && what.find("generation 0") != std::string::npos &&
                    what.find("rank 0 found a failure") != std::string::npos,
                "the error names neither the call nor the revoke: {}", what);
        require(seconds_since(start) < std::chrono::duration<double>(kQuick).count(),
                "woken only after {:.2f} s", seconds_since(start));
      }
    }
    try {
      comm.barrier();
      require(false, "a call after the revoke succeeded");
    } catch (const Error& e) {
      say(fmt::format("[later call] {}", e.what()));
      require(e.code() == ErrorCode::Revoked, "later call: {}: {}", to_string(e.code()), e.what());
    }
    reporter.outcome(fmt::format("ok woken after {:.3f} s", seconds_since(start)));
  });
  job.expect({});
}

// Every rank clears its own bit: every rank gets the AND of all four, twice in a row, also on a revoked
// communicator (agree runs in the store, not on its links).
TEST_P(Elastic, AgreeReturnsTheAndOfEveryRanksFlags) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    const std::uint32_t mine = ~(1u << comm.rank());
    comm.agree(1);  // all formed: what follows times one agreement alone
    const auto start = Clock::now();
    std::uint32_t first = comm.agree(mine);
    say(fmt::format("[rank {}] one agreement took {:.1f} ms", comm.rank(), 1e3 * seconds_since(start)));
    require(first == ~0xfu, "agree: {:#x}, expected {:#x}", first, ~0xfu);
    if (comm.rank() == 2) comm.revoke("agree on a revoked communicator");
    std::uint32_t second = comm.agree(comm.rank() == 1 ? 0x10u : 0x11u);
    require(second == 0x10u, "second agree: {:#x}", second);
    reporter.outcome("ok");
  });
  job.expect({});
}

// Rank 3 dies before it agrees: the others are told the AND of their own flags once its heartbeat stops.
TEST_P(Elastic, AgreeLeavesOutARankThatDied) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    comm.agree(1);  // everyone is up
    if (comm.rank() == 3) ::kill(::getpid(), SIGKILL);
    const auto start = Clock::now();
    std::uint32_t value = comm.agree(0xff00u | (1u << comm.rank()) | 0x80u);
    require(value == 0xff80u, "agree without rank 3: {:#x}", value);
    reporter.outcome(fmt::format("ok agreed in {:.2f} s", seconds_since(start)));
  });
  job.expect({3});
}

// The heart of it: rank 2 is SIGKILLed while every rank all-reduces; the survivors fail, shrink, and
// their all-reduces on the new group of three (world ranks 0, 1, 3 as ranks 0, 1, 2) are exact. Over a
// FileStore, and over a TcpStore (whose waits the server answers).
void killed_rank_then_shrink(bool tcp_store) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    comm.barrier();
    reporter.ready();
    const ErrorCode code = reduce_until_failure(comm);
    const auto failed_at = Clock::now();
    Communicator smaller = comm.shrink();
    const double shrink_seconds = seconds_since(failed_at);
    const int world_rank = comm.rank();
    require(smaller.size() == 3 && smaller.generation() == 1, "shrunk to {} ranks, generation {}", smaller.size(),
            smaller.generation());
    require(smaller.rank() == (world_rank < 2 ? world_rank : world_rank - 1), "world rank {} became rank {}",
            world_rank, smaller.rank());
    check_all_reduce(smaller, {0, 1, 3}, world_rank);
    say(fmt::format("[world rank {}] shrunk in {:.2f} s", world_rank, shrink_seconds));
    reporter.outcome(fmt::format("ok first error {}, shrunk in {:.2f} s", to_string(code), shrink_seconds));
  }, tcp_store);
  ASSERT_TRUE(job.group().wait_ready({0, 1, 2, 3}, Clock::now() + kLimit));
  std::this_thread::sleep_for(50ms);
  job.group().signal(2, SIGKILL);
  job.expect({2});
}

TEST_P(Elastic, SurvivorsOfAKilledRankShrinkAndAllReduce) {
  killed_rank_then_shrink(false);
}

TEST_P(Elastic, SurvivorsOfAKilledRankShrinkAndAllReduceOverATcpStore) {
  killed_rank_then_shrink(true);
}

// Rank 3 is killed; while the others shrink, rank 1 dies too, before it takes part. The shrink leaves
// both out: world ranks 0 and 2 form a group of two.
TEST_P(Elastic, ASecondDeathDuringTheShrinkIsLeftOut) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    comm.barrier();
    reporter.ready();
    reduce_until_failure(comm);
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(200ms);  // the others are inside shrink() by now
      ::kill(::getpid(), SIGKILL);
    }
    Communicator smaller = comm.shrink();
    require(smaller.size() == 2 && smaller.rank() == comm.rank() / 2, "world rank {}: rank {} of {}", comm.rank(),
            smaller.rank(), smaller.size());
    check_all_reduce(smaller, {0, 2}, comm.rank());
    reporter.outcome("ok");
  });
  ASSERT_TRUE(job.group().wait_ready({0, 1, 2, 3}, Clock::now() + kLimit));
  std::this_thread::sleep_for(50ms);
  job.group().signal(3, SIGKILL);
  job.expect({1, 3});
}

// No rank dies: a revoke alone, then a shrink that keeps everyone; the revoked communicator's
// sub-communicator is revoked with it, and the shrunk group can shrink again.
TEST_P(Elastic, ARevokedCommunicatorShrinksToEveryRankAndItsChildIsRevoked) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    Communicator pair = comm.split(comm.rank() / 2);
    comm.agree(1);  // not a barrier: the revoke could end it under a rank still finishing it
    if (comm.rank() == 0) comm.revoke("test");
    Communicator again = comm.shrink();
    require(again.size() == 4 && again.rank() == comm.rank() && again.generation() == 1, "rank {} of {}, gen {}",
            again.rank(), again.size(), again.generation());
    check_all_reduce(again, {0, 1, 2, 3}, comm.rank());
    try {
      std::vector<float> v(10, 1.0f);
      pair.all_reduce(std::span(v));
      require(false, "the revoked communicator's child still works");
    } catch (const Error& e) {
      require(e.code() == ErrorCode::Revoked, "child: {}: {}", to_string(e.code()), e.what());
    }
    again.agree(1);  // every rank is done with its all-reduces: a shrink revokes, and would end them
    Communicator third = again.shrink();
    require(third.size() == 4 && third.generation() == 2, "second shrink: {} ranks, generation {}", third.size(),
            third.generation());
    check_all_reduce(third, {0, 1, 2, 3}, comm.rank());
    reporter.outcome("ok");
  });
  job.expect({});
}

// Rank 3 dies at some point inside a shrink (a thread of its own kills it 5 or 60 ms in: before
// it takes part, between the agreements, while the new group forms, or after): the survivors end in a
// valid group of the three of them with exact all-reduces, shrinking once more where the first new
// group still held rank 3. Never a hang. Over a TcpStore: a rank killed inside a FileStore's compare_set
// leaves its lock for 60 s, a limit docs/RELIABILITY.md states.
TEST_P(Elastic, ARankKilledAnywhereInsideShrinkIsLeftOutInTheEnd) {
  for (int delay_ms : {5, 60}) {
    SCOPED_TRACE(fmt::format("rank 3 killed {} ms into the shrink", delay_ms));
    Job job(4, [delay_ms](Communicator& comm, const Reporter& reporter) {
      comm.agree(1);  // everyone is up (a barrier could be revoked under a rank still finishing it)
      if (comm.rank() == 3) {
        std::thread([delay_ms] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          ::kill(::getpid(), SIGKILL);
        }).detach();
        Communicator mine = comm.shrink();
        std::this_thread::sleep_for(60s);  // killed by its thread long before
      }
      Communicator current = comm.shrink();
      int shrinks = 1;
      while (current.size() == 4 && shrinks < 4) {  // rank 3 died after it took part: its calls fail
        try {
          check_all_reduce(current, {0, 1, 2, 3}, comm.rank());
          require(false, "an all-reduce with the dead rank 3 succeeded");
        } catch (const Error& e) {
          say(fmt::format("[world rank {}] the shrunk group still held rank 3: {}", comm.rank(), e.what()));
        }
        current = current.shrink();
        ++shrinks;
      }
      require(current.size() == 3 && current.rank() == comm.rank(), "rank {} of {} after {} shrinks", current.rank(),
              current.size(), shrinks);
      check_all_reduce(current, {0, 1, 2}, comm.rank());
      reporter.outcome(fmt::format("ok after {} shrink(s), generation {}", shrinks, current.generation()));
    }, /*tcp_store=*/true);  // a FileStore keeps the lock of a rank killed deciding (docs/RELIABILITY.md)
    const auto start = Clock::now();
    job.expect({3});
    say(fmt::format("[killed {} ms in] the survivors ended {:.2f} s later", delay_ms, seconds_since(start)));
  }
}

// Rank 2 is stopped (SIGSTOP), alive but silent: its heartbeat stops, so the survivors fail after the
// heartbeat timeout, leave it out of the shrink at once (a watcher's verdict) and go on in a group of
// three. Continued once they are done, it finds that it was left out: shrink tells it so with
// Error(Revoked), and it never joins the new group.
TEST_P(Elastic, AStoppedRankIsLeftOutAndWhenContinuedLearnsIt) {
  Job job(4, [](Communicator& comm, const Reporter& reporter) {
    comm.barrier();
    reporter.ready();
    reduce_until_failure(comm);
    try {
      const auto failed_at = Clock::now();
      Communicator smaller = comm.shrink();
      require(comm.rank() != 2, "the stopped rank joined the shrunk group as rank {}", smaller.rank());
      require(smaller.size() == 3, "shrunk to {} ranks", smaller.size());
      // The monitor's verdict left rank 2 out: the shrink did not time its silence for another 1.5 s.
      require(seconds_since(failed_at) < 1.0, "the shrink took {:.2f} s after the failure", seconds_since(failed_at));
      check_all_reduce(smaller, {0, 1, 3}, comm.rank());
    } catch (const Error& e) {
      say(fmt::format("[world rank {}] {}", comm.rank(), e.what()));
      require(comm.rank() == 2 && e.code() == ErrorCode::Revoked &&
                  std::string(e.what()).find("decided without this rank") != std::string::npos,
              "{}: {}", to_string(e.code()), e.what());
    }
    reporter.outcome("ok");
  });
  ASSERT_TRUE(job.group().wait_ready({0, 1, 2, 3}, Clock::now() + kLimit));
  std::this_thread::sleep_for(50ms);
  job.group().signal(2, SIGSTOP);
  EXPECT_TRUE(job.group().wait_ended({0, 1, 3}, Clock::now() + kLimit));
  job.group().signal(2, SIGCONT);
  job.expect({});
}

// A group of `members` ranks in processes 0 .. members - 1, and a newcomer (process `members`) that
// joins it: body(comm, reporter) on the members, newcomer(comm, reporter) once it has joined.
class JoinJob {
 public:
  JoinJob(int members, const std::function<void(Communicator&, const Reporter&)>& body,
          const std::function<void(Communicator&, const Reporter&)>& newcomer, bool tcp_store = false)
      : processes_(members + 1) {
    if (tcp_store) server_ = std::make_unique<testing::StoreServerProcess>("elastic-test");
    const std::string path = dir_.path();
    const std::uint16_t port = server_ ? server_->port() : 0;
    group_ = std::make_unique<ProcessGroup>(
        processes_, [path, port, members, body, newcomer](int index, const Reporter& reporter) {
          auto options = testing::group_options("elastic-test");
          auto store = port != 0 ? connect_tcp_store("127.0.0.1", port, "elastic-test", 20s) : open_file_store(path);
          if (index == members) {
            Communicator comm = Communicator::join(store, options);
            newcomer(comm, reporter);
            return;
          }
          Communicator comm(store, index, members, options);
          body(comm, reporter);
        });
  }
  ProcessGroup& group() { return *group_; }
  const std::string& store_path() const { return dir_.path(); }
  void expect(const std::vector<int>& killed) {
    std::vector<int> all;
    for (int r = 0; r < processes_; ++r) all.push_back(r);
    if (!group_->wait_ended(all, Clock::now() + kLimit)) group_->kill_unfinished();
    for (int r = 0; r < processes_; ++r) {
      const testing::ProcessEnd& end = group_->end(r);
      if (std::find(killed.begin(), killed.end(), r) != killed.end())
        EXPECT_EQ(end.signal, SIGKILL) << "process " << r << " " << end.describe();
      else
        EXPECT_TRUE(end.ok() && end.outcome.rfind("ok", 0) == 0) << "process " << r << " " << end.describe();
    }
  }

 private:
  int processes_;
  testing::TempDir dir_;
  std::unique_ptr<testing::StoreServerProcess> server_;
  std::unique_ptr<ProcessGroup> group_;
};

// Grows until the newcomer is in (it may take its ticket after the first grow), at most 40 times.
Communicator grow_until(Communicator comm, int size) {
  for (int attempt = 0; attempt < 40 && comm.size() < size; ++attempt) {
    std::this_thread::sleep_for(25ms);
    comm = comm.grow();
  }
  require(comm.size() == size, "grew to {} ranks, not {}", comm.size(), size);
  return comm;
}

// Every rank's generation, the same everywhere (all-reduce of max and min).
std::uint32_t common_generation(Communicator& comm) {
  std::vector<std::int64_t> high(1, comm.generation()), low(1, -static_cast<std::int64_t>(comm.generation()));
  comm.all_reduce(std::span(high), ReduceOp::Max);
  comm.all_reduce(std::span(low), ReduceOp::Max);
  require(high[0] == -low[0], "generations differ across ranks: {} to {}", -low[0], high[0]);
  return static_cast<std::uint32_t>(high[0]);
}

// Three ranks admit a fourth process started beside them: the newcomer is rank 3 (job rank 3) of a
// group of four whose all-reduces are exact.
TEST_P(Elastic, ANewcomerJoinsWhenTheMembersGrow) {
  JoinJob job(
      3,
      [](Communicator& comm, const Reporter& reporter) {
        Communicator grown = grow_until(std::move(comm), 4);
        require(grown.rank() < 3, "a member became rank {}", grown.rank());
        check_all_reduce(grown, {0, 1, 2, 3}, grown.rank());
        reporter.outcome(fmt::format("ok generation {}", common_generation(grown)));
      },
      [](Communicator& comm, const Reporter& reporter) {
        require(comm.rank() == 3 && comm.size() == 4, "the newcomer is rank {} of {}", comm.rank(), comm.size());
        check_all_reduce(comm, {0, 1, 2, 3}, 3);
        reporter.outcome(fmt::format("ok generation {}", common_generation(comm)));
      });
  job.expect({});
}

// The members poll joiners_waiting() between steps and decide together (Max) to grow: one grow admits
// the newcomer, and afterwards nobody is waiting.
TEST_P(Elastic, MembersGrowOnceTheyAgreeANewcomerWaits) {
  JoinJob job(
      3,
      [](Communicator& comm, const Reporter& reporter) {
        require(comm.joiners_waiting() <= 1, "{} joiners waiting, at most one started", comm.joiners_waiting());
        std::vector<std::int64_t> waiting(1, 0);
        for (int step = 0; step < 400 && waiting[0] == 0; ++step) {
          std::this_thread::sleep_for(10ms);
          waiting[0] = static_cast<std::int64_t>(comm.joiners_waiting());
          comm.all_reduce(std::span(waiting), ReduceOp::Max);
        }
        require(waiting[0] == 1, "the members agreed on {} joiners waiting", waiting[0]);
        Communicator grown = comm.grow();
        require(grown.size() == 4, "one grow after the newcomer waited gave {} ranks", grown.size());
        require(grown.joiners_waiting() == 0, "{} joiners still waiting after the grow", grown.joiners_waiting());
        check_all_reduce(grown, {0, 1, 2, 3}, grown.rank());
        reporter.outcome("ok");
      },
      [](Communicator& comm, const Reporter& reporter) {
        require(comm.joiners_waiting() == 0, "the newcomer sees {} joiners waiting", comm.joiners_waiting());
        check_all_reduce(comm, {0, 1, 2, 3}, 3);
        reporter.outcome("ok");
      });
  job.expect({});
}

// The whole cycle: rank 2 of four is killed, the survivors shrink to three and grow back to four with a
// replacement, which becomes rank 3 (job rank 4, a rank never used before).
TEST_P(Elastic, AReplacementJoinsTheShrunkGroup) {
  JoinJob job(
      4,
      [](Communicator& comm, const Reporter& reporter) {
        comm.barrier();
        reporter.ready();
        reduce_until_failure(comm);
        Communicator smaller = comm.shrink();
        Communicator grown = grow_until(std::move(smaller), 4);
        require(grown.rank() == (comm.rank() < 2 ? comm.rank() : comm.rank() - 1), "world rank {} became {}",
                comm.rank(), grown.rank());
        check_all_reduce(grown, {0, 1, 3, 4}, comm.rank());
        reporter.outcome(fmt::format("ok generation {}", common_generation(grown)));
      },
      [](Communicator& comm, const Reporter& reporter) {
        require(comm.rank() == 3 && comm.size() == 4, "the replacement is rank {} of {}", comm.rank(), comm.size());
        check_all_reduce(comm, {0, 1, 3, 4}, 4);
        reporter.outcome(fmt::format("ok generation {}", common_generation(comm)));
      });
  ASSERT_TRUE(job.group().wait_ready({0, 1, 2, 3}, Clock::now() + kLimit));
  std::this_thread::sleep_for(50ms);
  job.group().signal(2, SIGKILL);
  job.expect({2});
}

// The newcomer takes its ticket and dies before the members grow: their grow fails on every member
// alike, naming it, and leaves their communicator as it was; the next grow (nobody waiting) goes on.
TEST_P(Elastic, ANewcomerThatDiesFailsTheGrowOnEveryMemberAlike) {
  JoinJob job(
      3,
      [](Communicator& comm, const Reporter& reporter) {
        std::this_thread::sleep_for(300ms);  // the newcomer has its ticket and is dead by now
        try {
          comm.grow();
          require(false, "the grow with a dead newcomer succeeded");
        } catch (const Error& e) {
          say(fmt::format("[rank {}] {}", comm.rank(), e.what()));
          require(e.code() == ErrorCode::PeerFailed && std::string(e.what()).find("ticket 1") != std::string::npos,
                  "{}: {}", to_string(e.code()), e.what());
        }
        check_all_reduce(comm, {0, 1, 2}, comm.rank());  // the old group goes on
        Communicator again = comm.grow();
        require(again.size() == 3, "the next grow has {} ranks", again.size());
        check_all_reduce(again, {0, 1, 2}, comm.rank());
        reporter.outcome("ok");
      },
      [](Communicator&, const Reporter&) { require(false, "the dead newcomer joined"); });
  // Killed once it has its ticket and has named its process (join's first two steps).
  auto store = open_file_store(job.store_path());
  const auto give_up = Clock::now() + kLimit;
  while (!store->check({"canopy/elastic/joiner/1"}) && Clock::now() < give_up) std::this_thread::sleep_for(5ms);
  job.group().signal(3, SIGKILL);
  job.expect({3});
}

// Member 2 dies at some point inside a grow (a thread of its own kills it 0.2, 1 or 4 ms in; over a
// TcpStore): wherever the death lands, the newcomer never waits for the call deadline. Either the grow
// holds (the survivors shrink the dead member out if it was admitted) or the members give it up, and
// then the newcomer, which may be waiting for the dead member's part of the group's set-up, is told so
// at once (or finds the dead member's link closed).
TEST_P(Elastic, AMemberKilledInsideGrowNeverHoldsTheNewcomerToTheDeadline) {
  for (int delay_us : {200, 1000, 4000}) {
    SCOPED_TRACE(fmt::format("member 2 killed {} us into the grow", delay_us));
    auto settle = [](Communicator comm, int id, const Reporter& reporter) {
      for (int shrinks = 0; shrinks < 3; ++shrinks) {
        try {
          std::vector<std::int64_t> mine{id}, members(static_cast<std::size_t>(comm.size()));
          comm.all_gather(std::span<const std::int64_t>(mine), std::span(members));
          std::vector<int> ids(members.begin(), members.end());
          check_all_reduce(comm, ids, id);
          reporter.outcome(fmt::format("ok in a group of {}", comm.size()));
          return;
        } catch (const Error&) {
          comm = comm.shrink();
        }
      }
      require(false, "no group after 3 shrinks");
    };
    const auto start = Clock::now();
    JoinJob job(
        3,
        [delay_us, settle](Communicator& comm, const Reporter& reporter) {
          const int id = comm.rank();
          std::vector<std::int64_t> waiting{0};
          while (waiting[0] == 0) {  // every member has seen the newcomer's ticket
            std::this_thread::sleep_for(5ms);
            waiting[0] = static_cast<std::int64_t>(comm.joiners_waiting());
            comm.all_reduce(std::span(waiting), ReduceOp::Max);
          }
          if (id == 2)
            std::thread([delay_us] {
              std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
              ::kill(::getpid(), SIGKILL);
            }).detach();
          auto grown = [&comm]() -> Communicator {
            try {
              return comm.grow();
            } catch (const Error& e) {
              say(fmt::format("[rank {}] {}", comm.rank(), e.what()));
              return std::move(comm);
            }
          };
          Communicator after = grown();
          if (id == 2) std::this_thread::sleep_for(60s);  // killed long before
          settle(std::move(after), id, reporter);
        },
        [settle](Communicator& comm, const Reporter& reporter) { settle(std::move(comm), 4, reporter); },
        /*tcp_store=*/true);  // a FileStore keeps the lock of a member killed deciding (docs/RELIABILITY.md)
    const auto ended = Clock::now() + 6s;  // far below the 20 s call deadline
    job.group().wait_ended({0, 1, 3}, ended);
    for (int p : {0, 1, 3}) {
      const testing::ProcessEnd& end = job.group().end(p);
      EXPECT_TRUE(end.ended) << "process " << p << " still running 6 s after the grow began";
      if (p < 3) {
        EXPECT_TRUE(end.ok() && end.outcome.rfind("ok", 0) == 0) << "member " << p << " " << end.describe();
      }
    }
    const testing::ProcessEnd& newcomer = job.group().end(3);
    // In the group, or told that it is not: "the members gave up ...", or the dead member's end of a link.
    EXPECT_TRUE(newcomer.signal == 0 && (newcomer.outcome.rfind("ok", 0) == 0 ||
                                         newcomer.outcome.rfind("exception", 0) == 0))
        << newcomer.describe();
    // On one host the kernel tells that member 2 has ended: nobody waits for its heartbeat to stop (1.5 s),
    // even where it died before its monitor in the grown group had named its process.
    const testing::ProcessEnd& victim = job.group().end(2);
    for (int p : {0, 1, 3}) {
      const testing::ProcessEnd& end = job.group().end(p);
      if (end.ended && victim.ended) {
        EXPECT_LT(std::chrono::duration<double>(end.ended_at - victim.ended_at).count(), 1.0)
            << "process " << p << " ended that long after member 2's death";
      }
    }
    say(fmt::format("[killed {} us in] newcomer: {}; {:.2f} s, {:.2f} s after the death", delay_us,
                    newcomer.outcome, seconds_since(start),
                    std::chrono::duration<double>(newcomer.ended_at - victim.ended_at).count()));
    job.group().kill_unfinished();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Elastic, ::testing::Values("tcp", "shm+tcp"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param == "tcp" ? std::string("Tcp") : std::string("Shm");
                         });

}  // namespace
}  // namespace canopy
