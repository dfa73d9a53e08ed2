// What only the etcd store has (the operations themselves are in store_test.cpp's typed suite): waits woken
// by a watch, the job token, etcd's request limit, failover when a member dies, a clear error when the
// cluster loses its quorum, leases that expire a dead client's keys, and ranks forming a group through it.
// Real etcd members on loopback (tests/support/etcd_cluster.hpp).
#include "rendezvous/etcd_store.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <span>
#include <thread>

#include "canopy/communicator.hpp"
#include "canopy/error.hpp"
#include "common/deadline.hpp"
#include "rendezvous/etcd_client.hpp"
#include "tests/support/config_error.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy::rendezvous {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::require;

#define SKIP_WITHOUT_ETCD() \
  if (!testing::etcd_installed()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)"

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no canopy::Error was thrown";
  return Error(ErrorCode::System, "");
}

// A get that waits is one read, one watch and one read after the watch fires: never a poll.
TEST(EtcdStore, AWaitingGetIsWokenByItsWatch) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(1);
  auto store = connect_etcd_store(cluster.address("watch"), "tok", 10s);
  auto writer = connect_etcd_store(cluster.address("watch"), "tok", 10s);
  Clock::time_point written;
  std::thread setter([&] {
    std::this_thread::sleep_for(800ms);
    written = Clock::now();
    writer->set("late", "arrived");
  });
  const std::uint64_t before = store->requests_sent();
  EXPECT_EQ(store->get("late", 10s), "arrived");
  const auto woken_after = Clock::now() - written;
  setter.join();
  EXPECT_EQ(store->requests_sent() - before, 3u);
  EXPECT_LT(woken_after, 1s);  // about 20 ms quiet; the bound leaves room for a loaded CI machine
  // wait() and get_many() the same way, key after key.
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    writer->set("b", "2");
    writer->set("a", "1");
  });
  EXPECT_EQ(store->get_many({"a", "b"}, 10s), (std::vector<std::string>{"1", "2"}));
  later.join();
}

// add(key, 0) reads the counter (elastic loops poll the join tickets so every step): one range request, no
// write, so etcd's revision stays where it was; an absent counter reads 0 and stays absent.
TEST(EtcdStore, AnAddOfZeroIsOneReadAndWritesNothing) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(1);
  auto store = connect_etcd_store(cluster.address("read"), "tok", 10s);
  EtcdClient status(parse_etcd_address(cluster.address("status")));
  auto revision = [&] {
    return json_int(status.call("/v3/maintenance/status", nlohmann::json::object(), Deadline::after(5s),
                                "status")["header"],
                    "revision");
  };
  EXPECT_EQ(store->add("tickets", 0), 0);
  EXPECT_FALSE(store->check({"tickets"}));
  EXPECT_EQ(store->add("tickets", 3), 3);
  const std::int64_t before = revision();
  const std::uint64_t requests = store->requests_sent();
  EXPECT_EQ(store->add("tickets", 0), 3);
  EXPECT_EQ(store->requests_sent() - requests, 1u);
  EXPECT_EQ(revision(), before);
  store->set("text", "x");
  EXPECT_EQ(error_of([&] { store->add("text", 0); }).code(), ErrorCode::InvalidArgument);
}

TEST(EtcdStore, AnotherJobsTokenOnTheSamePrefixIsRefused) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(1);
  auto mine = connect_etcd_store(cluster.address("jobs/a"), "token-a", 10s);
  std::string message =
      testing::config_error_of([&] { connect_etcd_store(cluster.address("jobs/a"), "token-b", 10s); });
  EXPECT_MENTIONS(message, "another job");
  EXPECT_MENTIONS(message, "jobs/a");
  auto other_prefix = connect_etcd_store(cluster.address("jobs/b"), "token-b", 10s);
  mine->set("k", "a's");
  EXPECT_FALSE(other_prefix->check({"k"}));
  EXPECT_EQ(connect_etcd_store(cluster.address("jobs/a"), "token-a", 10s)->get("k", 1s), "a's");
}

TEST(EtcdStore, AValueOverEtcdsRequestLimitIsRefusedAndTheStoreGoesOn) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(1);
  auto store = connect_etcd_store(cluster.address("big"), "tok", 10s);
  Error e = error_of([&] { store->set("big", std::string(2 << 20, 'x')); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
  EXPECT_MENTIONS(std::string(e.what()), "max-request-bytes");
  store->set("small", "ok");
  EXPECT_EQ(store->get("small", 1s), "ok");
}

TEST(EtcdStore, NoMemberRunningIsAnErrorNamingTheStoreWithinTheDeadline) {
  SKIP_WITHOUT_ETCD();
  std::string address;
  {
    EtcdCluster cluster(1);  // its port, once it is gone: nothing listens there
    address = cluster.address("gone");
  }
  auto start = Clock::now();
  Error e = error_of([&] { connect_etcd_store(address, "tok", 1500ms); });
  EXPECT_EQ(e.code(), ErrorCode::PeerFailed) << e.what();
  EXPECT_LT(Clock::now() - start, 2500ms);
  EXPECT_MENTIONS(std::string(e.what()), address);
}

// Members listed leader first, so that the member this client talks to is the one killed, and the cluster
// must elect another leader: the client's calls go on after one election (0.5-0.9 s measured; the bound
// leaves room for a loaded machine), and a get that was watching on the killed member watches on another
// and is woken there.
TEST(EtcdStore, KillingOneOfThreeMembersPausesTheStoreForOneElection) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(3);
  const int leader = cluster.leader();
  auto store = connect_etcd_store(cluster.address("failover", leader), "tok", 10s);
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  Clock::duration longest_pause{};
  std::thread client([&] {
    auto last = Clock::now();
    for (int i = 0; !stop; ++i) {
      store->set("k", std::to_string(i));
      EXPECT_EQ(store->add("n", 1), i + 1);
      auto now = Clock::now();
      longest_pause = std::max(longest_pause, now - last);
      last = now;
      ++done;
    }
  });
  auto waiter_store = connect_etcd_store(cluster.address("failover", leader), "tok", 10s);
  std::string waited;
  std::thread waiter([&] { waited = waiter_store->get("after-kill", 20s); });
  while (done < 20) std::this_thread::sleep_for(10ms);
  cluster.kill(leader);
  const int at_kill = done;
  std::this_thread::sleep_for(2s);
  stop = true;
  client.join();
  RecordProperty(
      "longest_pause_ms",
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(longest_pause).count()));
  EXPECT_GT(done - at_kill, 20);
  EXPECT_LT(longest_pause, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(longest_pause).count()
                               << " ms";
  EXPECT_EQ(store->get("n", 1s), std::to_string(done.load()));
  const auto set_at = Clock::now();
  store->set("after-kill", "seen");
  waiter.join();
  EXPECT_EQ(waited, "seen");
  EXPECT_LT(Clock::now() - set_at, 1s);
}

TEST(EtcdStore, KillingTwoOfThreeIsAnErrorNamingEveryMemberWithinTheDeadline) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(3);
  auto store = connect_etcd_store(cluster.address("quorum"), "tok", 10s);
  store->set("k", "v");
  // A get already watching on the member that survives: that member loses its leader and ends the watch.
  auto waiter = connect_etcd_store(cluster.address("quorum", 2), "tok", 10s);
  ErrorCode waited = ErrorCode::System;
  std::thread waiting([&] { waited = error_of([&] { waiter->get("never", 4s); }).code(); });
  std::this_thread::sleep_for(300ms);
  cluster.kill(0);
  cluster.kill(1);
  store->set_timeout(3s);
  auto start = Clock::now();
  Error e = error_of([&] { store->set("k", "w"); });
  const auto took = Clock::now() - start;
  RecordProperty("failed_after_ms",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_EQ(e.code(), ErrorCode::PeerFailed) << e.what();
  EXPECT_GE(took, 2900ms);
  EXPECT_LT(took, 4s);
  for (int i = 0; i < 3; ++i) EXPECT_MENTIONS(std::string(e.what()), cluster.member(i));
  // A read needs the quorum too (etcd's reads are linearizable).
  EXPECT_EQ(error_of([&] { store->get("k", 1s); }).code(), ErrorCode::PeerFailed);
  waiting.join();
  EXPECT_EQ(waited, ErrorCode::PeerFailed);
}

// A forked client writes one key with its lease and one without, and is killed: the leased key outlives
// several TTLs while the client lives (it renews), and vanishes within a TTL or so after its death.
TEST(EtcdStore, ALeasedKeyOfADeadClientExpires) {
  SKIP_WITHOUT_ETCD();
  EtcdCluster cluster(1);
  const std::string address = cluster.address("lease");
  auto store = connect_etcd_store(address, "tok", 10s);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      auto leased = connect_etcd_store(address, "tok", 10s, 1s);
      leased->set("rank/1/alive", "yes");
      leased->add("rank/1/beats", 1);
      connect_etcd_store(address, "tok", 10s)->set("shared", "stays");
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  EXPECT_EQ(store->get("shared", 10s), "stays");
  std::this_thread::sleep_for(2500ms);  // two and a half TTLs: renewed, not expired
  EXPECT_TRUE(store->check({"rank/1/alive", "rank/1/beats"}));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  auto killed = Clock::now();
  while (store->check({"rank/1/alive"}) && Clock::now() - killed < 10s) std::this_thread::sleep_for(50ms);
  const auto gone_after = Clock::now() - killed;
  EXPECT_FALSE(store->check({"rank/1/alive"}));
  EXPECT_FALSE(store->check({"rank/1/beats"}));
  EXPECT_LT(gone_after, 2500ms);
  EXPECT_EQ(store->get("shared", 1s), "stays");
}

// The end-to-end: ranks started the way canopy-run starts them, but with an etcd:// store address, form a
// group (Communicator::from_environment) and all-reduce through it.
TEST(EtcdStore, RanksFormAGroupAndAllReduceThroughAnEtcdAddress) {
  SKIP_WITHOUT_ETCD();
  constexpr int kRanks = 4;
  EtcdCluster cluster(3);
  const std::string address = cluster.address("e2e/job");
  auto exits = testing::run_processes(
      kRanks,
      [&](int rank) {
        testing::ScopedEnv env;
        env.set("CANOPY_RANK", std::to_string(rank))
            .set("CANOPY_WORLD_SIZE", std::to_string(kRanks))
            .set("CANOPY_MASTER_ADDR", address)
            .set("CANOPY_JOB_TOKEN", "e2e-token")
            .set("CANOPY_SOCKET_IFNAME", "lo")
            .set("CANOPY_TRANSPORT", "tcp")
            .set("CANOPY_TIMEOUT", "60");
        Communicator comm = Communicator::from_environment();
        std::vector<float> data(1000, static_cast<float>(rank + 1));
        comm.all_reduce(std::span(data), ReduceOp::Sum);
        for (float x : data) require(x == kRanks * (kRanks + 1) / 2, "rank {} summed {}", rank, x);
        comm.barrier();
      },
      60s);
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << rank << ": " << exits[rank].describe();
  auto store = connect_etcd_store(address, "e2e-token", 10s);
  EXPECT_TRUE(store->check({"round/0/canopy/comm/0/layout"}));
}

}  // namespace
}  // namespace canopy::rendezvous
