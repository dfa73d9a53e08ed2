// Losing a rank and going on, between real processes: revoke wakes every rank's call with
// Error(Revoked), agree returns the same AND on every survivor, shrink gives the survivors a smaller
// communicator whose all-reduces are right, over TCP and over shared memory, even when a second rank
// dies during the shrink (grow_test.cpp: a process started later joins). Ranks die by SIGKILL (no
// destructor runs). Every wait is bounded: a rank that has not ended by its limit is killed and fails.
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
#include "tests/collectives/elastic_jobs.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
using namespace elastic_testing;
using testing::Clock;
using testing::Reporter;
using testing::require;

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

INSTANTIATE_TEST_SUITE_P(Transports, Elastic, ::testing::Values("tcp", "shm+tcp"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param == "tcp" ? std::string("Tcp") : std::string("Shm");
                         });

}  // namespace
}  // namespace canopy
