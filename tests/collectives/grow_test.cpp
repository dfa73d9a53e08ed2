// Growing a group: a process started later joins when the members grow, a replacement joins a shrunk
// group, and a newcomer or a member that dies inside the grow fails it alike everywhere, never at the
// deadline. Between real processes, over TCP and over shared memory (the Elastic suite of elastic_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/collectives/elastic_jobs.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
using namespace elastic_testing;
using testing::Clock;
using testing::ProcessGroup;
using testing::Reporter;
using testing::require;

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
          auto store =
              port != 0 ? connect_tcp_store("127.0.0.1", port, "elastic-test", 20s) : open_file_store(path);
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

// Every member asks joiners_waiting() between steps of 10 ms and they decide together (Max), as an elastic
// loop does; once they agree that one newcomer waits, one grow admits it.
Communicator grow_once_a_newcomer_waits(Communicator& comm) {
  std::vector<std::int64_t> waiting(1, 0);
  for (int step = 0; step < 400 && waiting[0] == 0; ++step) {
    std::this_thread::sleep_for(10ms);
    waiting[0] = static_cast<std::int64_t>(comm.joiners_waiting());
    comm.all_reduce(std::span(waiting), ReduceOp::Max);
  }
  require(waiting[0] == 1, "the members agreed on {} joiners waiting", waiting[0]);
  return comm.grow();
}

// Every rank's generation, the same everywhere (all-reduce of max and min).
std::uint32_t common_generation(Communicator& comm) {
  std::vector<std::int64_t> high(1, comm.generation()), low(1, -static_cast<std::int64_t>(comm.generation()));
  comm.all_reduce(std::span(high), ReduceOp::Max);
  comm.all_reduce(std::span(low), ReduceOp::Max);
  require(high[0] == -low[0], "generations differ across ranks: {} to {}", -low[0], high[0]);
  return static_cast<std::uint32_t>(high[0]);
}

// Once asked, joiners_waiting() is the liveness monitor's reading (every 0.1 s here): a loop that asks
// after every step sends the store nothing, and still sees the newcomer within a few rounds.
TEST_P(Elastic, AskingAfterEveryStepWhetherAnyoneWaitsSendsTheStoreNothing) {
  JoinJob job(
      2,
      [](Communicator& comm, const Reporter& reporter) {
        comm.joiners_waiting();  // the first ask reads the store, and has the monitor read it from now on
        std::this_thread::sleep_for(300ms);
        const std::uint64_t before = comm.store_requests_sent();
        for (int ask = 0; ask < 1000; ++ask) comm.joiners_waiting();
        const std::uint64_t sent = comm.store_requests_sent() - before;
        require(sent == 0, "1000 asks sent the store {} requests", sent);
        Communicator grown = grow_once_a_newcomer_waits(comm);
        require(grown.size() == 3, "one grow after the newcomer waited gave {} ranks", grown.size());
        check_all_reduce(grown, {0, 1, 2}, grown.rank());
        reporter.outcome("ok");
      },
      [](Communicator& comm, const Reporter& reporter) {
        check_all_reduce(comm, {0, 1, 2}, 2);
        reporter.outcome("ok");
      },
      /*tcp_store=*/true);
  job.expect({});
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
        require(comm.rank() == 3 && comm.size() == 4, "the newcomer is rank {} of {}", comm.rank(),
                comm.size());
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
        require(comm.joiners_waiting() <= 1, "{} joiners waiting, at most one started",
                comm.joiners_waiting());
        Communicator grown = grow_once_a_newcomer_waits(comm);
        require(grown.size() == 4, "one grow after the newcomer waited gave {} ranks", grown.size());
        require(grown.joiners_waiting() == 0, "{} joiners still waiting after the grow",
                grown.joiners_waiting());
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
        require(comm.rank() == 3 && comm.size() == 4, "the replacement is rank {} of {}", comm.rank(),
                comm.size());
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
          require(e.code() == ErrorCode::PeerFailed &&
                      std::string(e.what()).find("ticket 1") != std::string::npos,
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
  while (!store->check({"canopy/elastic/joiner/1"}) && Clock::now() < give_up)
    std::this_thread::sleep_for(5ms);
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
    EXPECT_TRUE(newcomer.signal == 0 &&
                (newcomer.outcome.rfind("ok", 0) == 0 || newcomer.outcome.rfind("exception", 0) == 0))
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

}  // namespace
}  // namespace canopy
