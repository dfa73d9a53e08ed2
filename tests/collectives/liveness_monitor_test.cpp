// The liveness monitor and the shared first failure, over an in-memory store: ranks are monitors of
// this process, and a "silent" rank is one whose counter nobody bumps. Waits are bounded generously;
// nothing here asserts how fast a verdict comes, only which verdict.
#include "collectives/elastic/liveness_monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "canopy/store.hpp"
#include "collectives/elastic/first_failure.hpp"
#include "common/error.hpp"
#include "tests/transport/memory_store.hpp"

namespace canopy::collectives {
namespace {

using namespace std::chrono_literals;
using testing::MemoryStore;

// What a monitor asked its communicator to abort with, once it did.
class AbortSeen {
 public:
  LivenessMonitor::AbortCommunicator callback() {
    return [this](const Error& reason) {
      std::lock_guard lock(mutex_);
      reasons_.push_back(reason.what());
      changed_.notify_all();
    };
  }
  // The first reason, waiting up to `limit` for it; "" when none came.
  std::string wait(Duration limit) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, limit, [this] { return !reasons_.empty(); });
    return reasons_.empty() ? std::string() : reasons_.front();
  }
  std::size_t count() {
    std::lock_guard lock(mutex_);
    return reasons_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> reasons_;
};

LivenessSettings quick(Duration interval, Duration timeout) {
  LivenessSettings settings;
  settings.interval = interval;
  settings.timeout = timeout;
  return settings;
}

constexpr Duration kVerdictLimit =
    30s;  // far above any timeout below: only a monitor that never decides fails

TEST(LivenessMonitor, NamesARankWhoseHeartbeatStopped) {
  auto store = std::make_shared<MemoryStore>();
  store->add("liveness/beats/1", 1);  // rank 1 beat once, then went silent
  FirstFailure first(store, 0);
  AbortSeen seen;
  {
    LivenessMonitor monitor(store, first, 0, 2, quick(10ms, 200ms), seen.callback());
    std::string reason = seen.wait(kVerdictLimit);
    EXPECT_NE(reason.find("rank 0: rank 1 sent no heartbeat for"), std::string::npos) << reason;
  }
  // The verdict is the communicator's first failure: every other rank reads it.
  auto record = FirstFailure(store, 3).read();
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->code, ErrorCode::PeerFailed);
  EXPECT_EQ(record->reporter, 0);
  EXPECT_NE(record->message.find("rank 1 sent no heartbeat"), std::string::npos) << record->message;
  EXPECT_EQ(seen.count(), 1u);
}

TEST(LivenessMonitor, RanksThatBeatAreNeverCalledSilent) {
  auto store = std::make_shared<MemoryStore>();
  FirstFailure first0(store, 0), first1(store, 1), first2(store, 2);
  AbortSeen seen;
  {
    // Timeout 50 intervals: a verdict here would be a false positive, not a slow machine.
    auto settings = quick(20ms, 1000ms);
    LivenessMonitor m0(store, first0, 0, 3, settings, seen.callback());
    LivenessMonitor m1(store, first1, 1, 3, settings, seen.callback());
    LivenessMonitor m2(store, first2, 2, 3, settings, seen.callback());
    EXPECT_EQ(seen.wait(2500ms), "");
  }
  EXPECT_FALSE(FirstFailure(store, 0).read().has_value());
}

TEST(LivenessMonitor, ARankThatFinishedIsNotSilent) {
  auto store = std::make_shared<MemoryStore>();
  FirstFailure first0(store, 0), first1(store, 1);
  AbortSeen seen;
  {
    LivenessMonitor leaving(store, first1, 1, 2, quick(10ms, 200ms), seen.callback());
  }  // beats, then leaves
  ASSERT_TRUE(store->check({"liveness/left/1"}));
  {
    LivenessMonitor staying(store, first0, 0, 2, quick(10ms, 200ms), seen.callback());
    EXPECT_EQ(seen.wait(1500ms), "");
  }
}

TEST(LivenessMonitor, ARankThatNeverBeatIsLeftToTheDeadline) {
  auto store = std::make_shared<MemoryStore>();  // rank 1 is still forming its communicator
  FirstFailure first(store, 0);
  AbortSeen seen;
  LivenessMonitor monitor(store, first, 0, 2, quick(10ms, 200ms), seen.callback());
  EXPECT_EQ(seen.wait(1500ms), "");
}

TEST(LivenessMonitor, EveryRankAbortsWithTheFirstFailureAnotherRankPublished) {
  auto store = std::make_shared<MemoryStore>();
  FirstFailure first0(store, 0), first1(store, 1);
  AbortSeen seen0, seen1;
  LivenessMonitor m0(store, first0, 0, 4, quick(10ms, 10s), seen0.callback());
  LivenessMonitor m1(store, first1, 1, 4, quick(10ms, 10s), seen1.callback());
  FirstFailure(store, 2).blame(Error(ErrorCode::PeerFailed, "rank 2: connection to rank 3 closed"));
  for (AbortSeen* seen : {&seen0, &seen1}) {
    std::string reason = seen->wait(kVerdictLimit);
    EXPECT_NE(reason.find("as rank 2 reported it: rank 2: connection to rank 3 closed"), std::string::npos)
        << reason;
  }
}

// A store that works for `calls` calls, then fails every one as a dead TcpStore does.
class DyingStore final : public Store {
 public:
  DyingStore(std::shared_ptr<Store> inner, int calls) : inner_(std::move(inner)), left_(calls) {}
  void set(std::string_view k, std::string_view v) override { use()->set(k, v); }
  std::string get(std::string_view k, Duration t) override { return use()->get(k, t); }
  std::int64_t add(std::string_view k, std::int64_t d) override { return use()->add(k, d); }
  std::string compare_set(std::string_view k, std::string_view e, std::string_view d) override {
    return use()->compare_set(k, e, d);
  }
  bool check(const std::vector<std::string>& k) override { return use()->check(k); }
  void wait(const std::vector<std::string>& k, Duration t) override { use()->wait(k, t); }
  bool remove(std::string_view k) override { return use()->remove(k); }
  int failed_calls() const { return failed_.load(); }

 private:
  Store* use() {
    if (left_.fetch_sub(1) <= 0) {
      ++failed_;
      fail(ErrorCode::PeerFailed, "the TcpStore at 127.0.0.1:1 failed: connection refused");
    }
    return inner_.get();
  }
  std::shared_ptr<Store> inner_;
  std::atomic<int> left_;
  std::atomic<int> failed_{0};
};

TEST(LivenessMonitor, AnUnreachableStoreIsNotASilentPeer) {
  auto memory = std::make_shared<MemoryStore>();
  memory->add("liveness/beats/1", 1);
  auto store = std::make_shared<DyingStore>(memory, 6);  // a few rounds, then the store is gone
  FirstFailure first(store, 0);
  AbortSeen seen;
  {
    LivenessMonitor monitor(store, first, 0, 2, quick(10ms, 100ms), seen.callback());
    for (int i = 0; i < 3000 && store->failed_calls() == 0; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GT(store->failed_calls(), 0);
    EXPECT_EQ(seen.wait(1s), "");  // the monitor stopped, blaming nobody
  }
  EXPECT_EQ(seen.count(), 0u);
  EXPECT_FALSE(memory->check({"failure/first"}));
}

TEST(FirstFailure, TheFirstErrorWinsAndLaterOnesLeadWithIt) {
  auto store = std::make_shared<MemoryStore>();
  Error original(ErrorCode::PeerFailed, "rank 0: connection to rank 2 closed (did rank 2 exit or crash?)");
  Error first = FirstFailure(store, 0).blame(original);
  EXPECT_EQ(std::string(first.what()), original.what());

  Error later =
      FirstFailure(store, 1).blame(Error(ErrorCode::Timeout, "rank 1: timed out waiting for rank(s) 0"));
  EXPECT_EQ(later.code(), ErrorCode::PeerFailed);
  EXPECT_EQ(
      std::string(later.what()),
      "rank 1: the first failure in this communicator, as rank 0 reported it: rank 0: connection to rank 2 "
      "closed (did rank 2 exit or crash?)\nthen, on this rank: rank 1: timed out waiting for rank(s) 0");

  // An abort is the echo of the first failure: nothing of its own to add.
  Error echo = FirstFailure(store, 3).blame(Error(ErrorCode::Aborted, "rank 3: transport aborted: ..."));
  EXPECT_EQ(std::string(echo.what()).find("then, on this rank"), std::string::npos) << echo.what();
}

TEST(FirstFailure, WithoutAStoreEveryErrorStaysAsItWas) {
  Error e = FirstFailure(nullptr, 1).blame(Error(ErrorCode::Timeout, "rank 1: timed out"));
  EXPECT_EQ(e.code(), ErrorCode::Timeout);
  EXPECT_STREQ(e.what(), "rank 1: timed out");
}

// A store that has gone cannot carry the failure, and may be its cause (a peer that lost it exited): the
// error keeps what this rank saw and names the store's failure after it.
TEST(FirstFailure, AStoreThatFailedIsNamedAfterTheErrorItCouldNotShare) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "first-failure-test");
  auto store = connect_tcp_store("127.0.0.1", server->port(), "first-failure-test", 5s);
  server.reset();
  Error e = FirstFailure(store, 1).blame(Error(ErrorCode::PeerFailed, "rank 1: connection to rank 0 closed"));
  EXPECT_EQ(e.code(), ErrorCode::PeerFailed);
  const std::string text = e.what();
  EXPECT_EQ(text.rfind("rank 1: connection to rank 0 closed\n(the store could not be reached to share it: ", 0),
            0u)
      << text;
  EXPECT_NE(text.find("TcpStore"), std::string::npos) << text;
}

// The failure that ends a job may take the store's host with it (its launcher exits with its ranks): a
// rank whose monitor read the first failure, and whose call then fails on the abort, still reports that
// failure with its code, not the abort's echo and the lost store.
TEST(FirstFailure, OnceKnownTheFirstFailureOutlivesTheStore) {
  auto memory = std::make_shared<MemoryStore>();
  const Error verdict(ErrorCode::Timeout, "rank 0: rank 4 sent no heartbeat for 10.0 s");
  FirstFailure(memory, 0).blame(verdict);
  auto store = std::make_shared<DyingStore>(memory, 2);  // check and get, then the store is gone
  FirstFailure first(store, 7);
  ASSERT_TRUE(first.read().has_value());

  Error echo = first.blame(Error(ErrorCode::Aborted, "rank 7: transport aborted: rank 7: the first failure ..."));
  EXPECT_EQ(echo.code(), ErrorCode::Timeout);
  EXPECT_EQ(std::string(echo.what()),
            "rank 7: the first failure in this communicator, as rank 0 reported it: " + std::string(verdict.what()));
  Error own = first.blame(Error(ErrorCode::PeerFailed, "rank 7: connection to rank 5 closed"));
  EXPECT_EQ(own.code(), ErrorCode::Timeout);
  EXPECT_NE(std::string(own.what()).find("\nthen, on this rank: rank 7: connection to rank 5 closed"),
            std::string::npos)
      << own.what();
  EXPECT_EQ(store->failed_calls(), 0);  // neither asked the store again
}

TEST(FirstFailure, ARecordFromElsewhereIsReportedAsItIs) {
  auto record = FailureRecord::decode("not a record");
  EXPECT_EQ(record.reporter, -1);
  EXPECT_EQ(record.message, "not a record");
  auto round_trip = FailureRecord::decode(FailureRecord{ErrorCode::Mismatch, 7, "a\nb"}.encode());
  EXPECT_EQ(round_trip.code, ErrorCode::Mismatch);
  EXPECT_EQ(round_trip.reporter, 7);
  EXPECT_EQ(round_trip.message, "a\nb");
}

TEST(FirstFailure, EveryCodeSurvivesTheStore) {
  // The newest code is the last the decoder accepts: a rank out of descriptors is blamed as one.
  auto round_trip =
      FailureRecord::decode(FailureRecord{ErrorCode::Resource, 3, "out of descriptors"}.encode());
  EXPECT_EQ(round_trip.code, ErrorCode::Resource);
  EXPECT_EQ(round_trip.reporter, 3);
}

TEST(LivenessSettings, DefaultsOffAndBadValues) {
  auto defaults = LivenessSettings::from_environment({});
  EXPECT_EQ(defaults.interval, 1s);
  EXPECT_EQ(defaults.timeout, 10s);
  auto tuned = LivenessSettings::from_environment({{"CANOPY_HEARTBEAT_SECONDS", "0.5"}});
  EXPECT_EQ(tuned.interval, 500ms);
  EXPECT_EQ(tuned.timeout, 5s);
  EXPECT_FALSE(LivenessSettings::from_environment({{"CANOPY_HEARTBEAT_SECONDS", "0"}}).enabled());
  auto set_both = LivenessSettings::from_environment(
      {{"CANOPY_HEARTBEAT_SECONDS", "2"}, {"CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "30"}});
  EXPECT_EQ(set_both.timeout, 30s);
  for (EnvMap bad : {EnvMap{{"CANOPY_HEARTBEAT_SECONDS", "fast"}}, EnvMap{{"CANOPY_HEARTBEAT_SECONDS", "-1"}},
                     EnvMap{{"CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "0"}},
                     EnvMap{{"CANOPY_HEARTBEAT_SECONDS", "2"}, {"CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "3"}}}) {
    try {
      LivenessSettings::from_environment(bad);
      ADD_FAILURE() << "accepted " << bad.begin()->first << "=" << bad.begin()->second;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Config);
      EXPECT_NE(std::string(e.what()).find("CANOPY_HEARTBEAT"), std::string::npos) << e.what();
    }
  }
}

TEST(LivenessMonitor, WatchesTheNextFewRanks) {
  EXPECT_TRUE(LivenessMonitor::watched_ranks(0, 1).empty());
  EXPECT_EQ(LivenessMonitor::watched_ranks(2, 3), (std::vector<int>{0, 1}));
  EXPECT_EQ(LivenessMonitor::watched_ranks(8, 10), (std::vector<int>{9, 0, 1, 2}));
}

// The monitor's own handle is what keeps a long get() elsewhere from holding its heartbeat back.
TEST(StoreOpenAnother, ASecondTcpStoreHandleIsNotHeldBackByTheFirst) {
  TcpStoreServer server("127.0.0.1", 0, "token");
  auto first = connect_tcp_store("127.0.0.1", server.port(), "token", 10s);
  std::string got;
  std::thread waiter([&] { got = first->get("late", 60s); });  // holds `first` until the key exists
  auto second = first->open_another(10s);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->timeout(), 10s);
  EXPECT_EQ(second->add("counter", 1), 1);
  second->set("late", "here");  // through the first handle this would wait behind its own get
  waiter.join();
  EXPECT_EQ(got, "here");
}

TEST(StoreOpenAnother, PrefixStoresKeepTheirPrefix) {
  TcpStoreServer server("127.0.0.1", 0, "token");
  auto base = connect_tcp_store("127.0.0.1", server.port(), "token", 10s);
  auto prefixed = std::make_shared<PrefixStore>(base, "comm/7");
  auto another = prefixed->open_another(5s);
  ASSERT_NE(another, nullptr);
  another->set("k", "v");
  EXPECT_EQ(base->get("comm/7/k", 1s), "v");
}

}  // namespace
}  // namespace canopy::collectives
