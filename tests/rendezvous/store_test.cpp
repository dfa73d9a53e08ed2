// Every Store operation, against the TcpStore (a real server on loopback), the FileStore (a real directory)
// and, where built, the etcd store (a real etcd member on loopback): one typed suite, so that they cannot
// drift apart in semantics.
#include "canopy/store.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "common/deadline.hpp"
#include "tests/support/ranks.hpp"
#ifdef CANOPY_TEST_ETCD
#include "rendezvous/etcd_store.hpp"
#include "tests/support/etcd_cluster.hpp"
#endif

namespace canopy {
namespace {

using namespace std::chrono_literals;
using testing::require;

// Each backend: start() once per test, then connect() for every client (its own connection).
class TcpBackend {
 public:
  static constexpr std::size_t kBigValue = 2 << 20;
  static constexpr int kConcurrentClients = 256;
  static constexpr int kAddsPerClient = 20;
  static constexpr int kSwapsPerClient = 1;  // every client races every other one: retries grow as N^2
  void start() { server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "tok"); }
  std::shared_ptr<Store> connect() { return connect_tcp_store("127.0.0.1", server_->port(), "tok", 20s); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

class FileBackend {
 public:
  static constexpr std::size_t kBigValue = 2 << 20;
  static constexpr int kConcurrentClients = 64;
  static constexpr int kAddsPerClient = 10;
  static constexpr int kSwapsPerClient = 3;
  void start() {}
  std::shared_ptr<Store> connect() { return open_file_store(dir_.path() + "/store"); }

 private:
  testing::TempDir dir_;
};

#ifdef CANOPY_TEST_ETCD
// One member for the whole suite (a start costs a second); each test its own key prefix. Every write is a
// Raft round with an fsync, so the races are smaller than the TcpStore's.
class EtcdBackend {
 public:
  static constexpr std::size_t kBigValue = 1 << 20;  // etcd refuses requests over 1.5 MiB by default
  static constexpr int kConcurrentClients = 16;
  static constexpr int kAddsPerClient = 5;
  static constexpr int kSwapsPerClient = 2;
  void start() {
    static int tests = 0;
    if (!cluster()) cluster() = std::make_unique<testing::EtcdCluster>(1);
    address_ = cluster()->address(fmt::format("store-test/{}/{}", ::getpid(), ++tests));
  }
  std::shared_ptr<Store> connect() { return rendezvous::connect_etcd_store(address_, "tok", 20s); }

 private:
  static std::unique_ptr<testing::EtcdCluster>& cluster() {
    static std::unique_ptr<testing::EtcdCluster> shared;
    return shared;
  }
  std::string address_;
};
#endif

template <typename Backend>
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef CANOPY_TEST_ETCD
    if constexpr (std::is_same_v<Backend, EtcdBackend>) {
      if (!testing::etcd_installed()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)";
    }
#endif
    backend_.start();
    store_ = backend_.connect();
  }
  Backend backend_;
  std::shared_ptr<Store> store_;
};

#ifdef CANOPY_TEST_ETCD
using Backends = ::testing::Types<TcpBackend, FileBackend, EtcdBackend>;
#else
using Backends = ::testing::Types<TcpBackend, FileBackend>;
#endif
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, TcpBackend>) return "TcpStore";
    return std::is_same_v<T, FileBackend> ? "FileStore" : "EtcdStore";
  }
};
TYPED_TEST_SUITE(StoreTest, Backends, BackendNames);

template <typename F>
ErrorCode error_code_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no canopy::Error was thrown";
  return ErrorCode::System;
}

TYPED_TEST(StoreTest, SetThenGetReturnsTheBytes) {
  std::string binary("a\0b\xff\n", 5);
  this->store_->set("plain", "value");
  this->store_->set("binary", binary);
  this->store_->set("empty", "");
  this->store_->set("key with / and spaces %", "odd");
  std::string big(TypeParam::kBigValue, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4097) big[i] = static_cast<char>(i);
  this->store_->set("big", big);
  EXPECT_EQ(this->store_->get("plain", 1s), "value");
  EXPECT_EQ(this->store_->get("binary", 1s), binary);
  EXPECT_EQ(this->store_->get("empty", 1s), "");
  EXPECT_EQ(this->store_->get("key with / and spaces %", 1s), "odd");
  EXPECT_EQ(this->store_->get("big", 1s), big);
  this->store_->set("plain", "overwritten");
  EXPECT_EQ(this->store_->get("plain", 1s), "overwritten");
}

TYPED_TEST(StoreTest, LongAndBinaryKeysAreDistinct) {
  std::string long_a(3000, 'a'), long_b(3000, 'a');
  long_b.back() = 'b';
  std::string binary_key("k\0\x01/..", 6);
  this->store_->set(long_a, "A");
  this->store_->set(long_b, "B");
  this->store_->set(binary_key, "binary");
  this->store_->set("..", "dots");
  EXPECT_EQ(this->store_->get(long_a, 1s), "A");
  EXPECT_EQ(this->store_->get(long_b, 1s), "B");
  EXPECT_EQ(this->store_->get(binary_key, 1s), "binary");
  EXPECT_EQ(this->store_->get("..", 1s), "dots");
}

TYPED_TEST(StoreTest, GetWaitsUntilAnotherClientSetsTheKey) {
  auto other = this->backend_.connect();
  std::thread setter([&] {
    std::this_thread::sleep_for(150ms);
    other->set("late", "arrived");
  });
  auto start = Clock::now();
  EXPECT_EQ(this->store_->get("late", 10s), "arrived");
  EXPECT_GE(Clock::now() - start, 100ms);
  setter.join();
}

TYPED_TEST(StoreTest, GetTimesOutNearItsDeadlineNamingTheKey) {
  std::string message;
  auto start = Clock::now();
  EXPECT_EQ(error_code_of([&] { this->store_->get("never-set", 300ms); }, &message), ErrorCode::Timeout);
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, 290ms);
  EXPECT_LT(waited, 5s);
  EXPECT_NE(message.find("never-set"), std::string::npos) << message;
  // The store is still usable after a timeout.
  this->store_->set("after", "ok");
  EXPECT_EQ(this->store_->get("after", 1s), "ok");
}

TYPED_TEST(StoreTest, DefaultTimeoutIsUsedByTheShortOverloads) {
  this->store_->set_timeout(200ms);
  EXPECT_EQ(error_code_of([&] { this->store_->get("missing"); }), ErrorCode::Timeout);
  EXPECT_EQ(error_code_of([&] { this->store_->wait({"missing"}); }), ErrorCode::Timeout);
}

TYPED_TEST(StoreTest, WaitReturnsOnceEveryKeyExistsAndNamesTheMissingOnes) {
  this->store_->set("a", "1");
  std::string message;
  auto start = Clock::now();
  EXPECT_EQ(error_code_of([&] { this->store_->wait({"a", "b", "c"}, 300ms); }, &message), ErrorCode::Timeout);
  EXPECT_GE(Clock::now() - start, 290ms);
  std::string missing = message.substr(message.find("missing"));
  EXPECT_NE(missing.find("'b'"), std::string::npos) << message;
  EXPECT_NE(missing.find("'c'"), std::string::npos) << message;
  EXPECT_EQ(missing.find("'a'"), std::string::npos) << message;

  auto other = this->backend_.connect();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    other->set("b", "2");
    std::this_thread::sleep_for(50ms);
    other->set("c", "3");
  });
  this->store_->wait({"a", "b", "c"}, 10s);
  EXPECT_TRUE(this->store_->check({"a", "b", "c"}));
  setter.join();
  this->store_->wait({}, 0ms);
}

TYPED_TEST(StoreTest, AddCountsFromZeroAndRejectsNonIntegers) {
  EXPECT_EQ(this->store_->add("counter", 5), 5);
  EXPECT_EQ(this->store_->add("counter", -7), -2);
  EXPECT_EQ(this->store_->add("counter", 0), -2);
  EXPECT_EQ(this->store_->get("counter", 1s), "-2");
  this->store_->set("text", "hello");
  std::string message;
  EXPECT_EQ(error_code_of([&] { this->store_->add("text", 1); }, &message), ErrorCode::InvalidArgument);
  EXPECT_NE(message.find("text"), std::string::npos) << message;
  this->store_->set("big", "9223372036854775807");
  EXPECT_EQ(error_code_of([&] { this->store_->add("big", 1); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(this->store_->add("counter", 2), 0);  // still usable
}

TYPED_TEST(StoreTest, CompareSetSwapsOnlyOnAMatch) {
  EXPECT_EQ(this->store_->compare_set("k", "", "first"), "first");  // absent counts as ""
  EXPECT_EQ(this->store_->compare_set("k", "", "second"), "first");
  EXPECT_EQ(this->store_->compare_set("k", "wrong", "second"), "first");
  EXPECT_EQ(this->store_->compare_set("k", "first", "second"), "second");
  EXPECT_EQ(this->store_->get("k", 1s), "second");
  EXPECT_EQ(this->store_->compare_set("absent", "something", "x"), "");
  EXPECT_FALSE(this->store_->check({"absent"}));
}

TYPED_TEST(StoreTest, CheckAndRemove) {
  EXPECT_TRUE(this->store_->check({}));
  EXPECT_FALSE(this->store_->check({"x"}));
  this->store_->set("x", "1");
  EXPECT_TRUE(this->store_->check({"x"}));
  EXPECT_FALSE(this->store_->check({"x", "y"}));
  EXPECT_TRUE(this->store_->remove("x"));
  EXPECT_FALSE(this->store_->remove("x"));
  EXPECT_FALSE(this->store_->check({"x"}));
  EXPECT_EQ(error_code_of([&] { this->store_->get("x", 50ms); }), ErrorCode::Timeout);
  EXPECT_EQ(this->store_->add("x", 3), 3);  // a removed counter starts again from zero
}

TYPED_TEST(StoreTest, ManyKeysInOneWaitAndCheck) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1500; ++i) keys.push_back("many/" + std::to_string(i));
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) this->store_->set(keys[i], "v");
  EXPECT_FALSE(this->store_->check(keys));
  this->store_->set(keys.back(), "v");
  EXPECT_TRUE(this->store_->check(keys));
  this->store_->wait(keys, 5s);
}

TYPED_TEST(StoreTest, GetManyReturnsTheValuesInTheOrderOfTheKeys) {
  std::string binary("x\0y\xfe", 4);
  this->store_->set("m/2", "two");
  this->store_->set("m/0", "");
  this->store_->set("m/1", binary);
  EXPECT_EQ(this->store_->get_many({"m/1", "m/0", "m/2", "m/1"}, 1s),
            (std::vector<std::string>{binary, "", "two", binary}));
  EXPECT_TRUE(this->store_->get_many({}, 0ms).empty());
  this->store_->set_timeout(1s);
  EXPECT_EQ(this->store_->get_many({"m/2"}), std::vector<std::string>{"two"});
}

TYPED_TEST(StoreTest, GetManyWaitsForLateKeysAndNamesTheMissingOnes) {
  this->store_->set("a", "1");
  std::string message;
  auto start = Clock::now();
  auto gather = [&] { this->store_->get_many({"a", "b", "c"}, 300ms); };
  EXPECT_EQ(error_code_of(gather, &message), ErrorCode::Timeout);
  EXPECT_GE(Clock::now() - start, 290ms);
  EXPECT_LT(Clock::now() - start, 5s);
  std::string missing = message.substr(message.find("missing"));
  EXPECT_NE(missing.find("'b'"), std::string::npos) << message;
  EXPECT_NE(missing.find("'c'"), std::string::npos) << message;
  EXPECT_EQ(missing.find("'a'"), std::string::npos) << message;

  auto other = this->backend_.connect();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    other->set("c", "3");
    std::this_thread::sleep_for(50ms);
    other->set("b", "2");
  });
  EXPECT_EQ(this->store_->get_many({"a", "b", "c"}, 10s), (std::vector<std::string>{"1", "2", "3"}));
  setter.join();
}

TYPED_TEST(StoreTest, GetManyOfThousandsOfKeys) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1500; ++i) keys.push_back("addr/" + std::to_string(i));  // more than one WAIT carries
  for (std::size_t i = keys.size(); i-- > 0;) this->store_->set(keys[i], "host-" + std::to_string(i));
  auto values = this->store_->get_many(keys, 5s);
  ASSERT_EQ(values.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(values[i], "host-" + std::to_string(i));
}

TYPED_TEST(StoreTest, PrefixStoreIsolatesKeys) {
  auto base = this->store_;
  PrefixStore a(base, "group/a"), b(base, "group/b");
  a.set("k", "from a");
  b.set("k", "from b");
  EXPECT_EQ(a.get("k", 1s), "from a");
  EXPECT_EQ(b.get("k", 1s), "from b");
  EXPECT_EQ(base->get("group/a/k", 1s), "from a");
  EXPECT_FALSE(base->check({"k"}));
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 5), 5);
  EXPECT_EQ(a.compare_set("n", "2", "3"), "3");
  EXPECT_TRUE(a.check({"k", "n"}));
  EXPECT_TRUE(a.remove("k"));
  EXPECT_FALSE(a.check({"k"}));
  EXPECT_TRUE(b.check({"k"}));
  EXPECT_EQ(error_code_of([&] { a.wait({"k"}, 50ms); }), ErrorCode::Timeout);
  EXPECT_EQ(b.get_many({"n", "k"}, 1s), (std::vector<std::string>{"5", "from b"}));
  EXPECT_EQ(error_code_of([&] { a.get_many({"n", "k"}, 50ms); }), ErrorCode::Timeout);
  PrefixStore nested(std::make_shared<PrefixStore>(base, "round/1"), "sub");
  nested.set("x", "deep");
  EXPECT_EQ(base->get("round/1/sub/x", 1s), "deep");
}

// Each client its own connection (TcpStore) or its own store object (FileStore), all at once: adds
// and compare_set increments must lose nothing and double nothing.
TYPED_TEST(StoreTest, ConcurrentClientsGiveExactCounts) {
  constexpr int kClients = TypeParam::kConcurrentClients;
  constexpr int kAdds = TypeParam::kAddsPerClient;
  constexpr int kSwaps = TypeParam::kSwapsPerClient;
  std::vector<std::shared_ptr<Store>> clients(kClients);
  testing::run_threads(kClients,
                       [&](int i) { clients[static_cast<std::size_t>(i)] = this->backend_.connect(); });
  testing::run_threads(kClients, [&](int i) {
    Store& store = *clients[static_cast<std::size_t>(i)];
    for (int op = 0; op < kAdds; ++op) store.add("adds", 1);
    for (int op = 0; op < kSwaps; ++op) {
      // An increment by compare_set: read, swap if unchanged, retry otherwise. The value names its
      // writer, so that a swap that lost to an identical count is not mistaken for a win.
      for (;;) {
        std::string seen = store.check({"cas"}) ? store.get("cas", 5s) : "";
        int count = seen.empty() ? 0 : std::stoi(seen.substr(0, seen.find(' ')));
        std::string next = fmt::format("{} by {}/{}", count + 1, i, op);
        if (store.compare_set("cas", seen, next) == next) break;
      }
    }
  });
  EXPECT_EQ(this->store_->get("adds", 1s), std::to_string(kClients * kAdds));
  std::string cas = this->store_->get("cas", 1s);
  EXPECT_EQ(cas.substr(0, cas.find(' ')), std::to_string(kClients * kSwaps)) << cas;
}

// The same from separate processes: each forked child connects on its own.
TYPED_TEST(StoreTest, ForkedProcessesGiveExactCounts) {
  constexpr int kProcesses = 6;
  constexpr int kOps = 30;
  auto exits = testing::run_processes(kProcesses, [&](int rank) {
    auto store = this->backend_.connect();
    for (int op = 0; op < kOps; ++op) store->add("adds", 1);
    store->set("done/" + std::to_string(rank), "1");
    auto total = store->add("adds", 0);
    require(total >= kOps, "rank {} saw the counter at {} after its own {} adds", rank, total, kOps);
  });
  for (int rank = 0; rank < kProcesses; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << rank << ": " << exits[rank].describe();
  EXPECT_EQ(this->store_->get("adds", 1s), std::to_string(kProcesses * kOps));
}

// FileStore locks are files "l.<encoded key>" beside the values (docs/RENDEZVOUS.md).
TEST(FileStoreLocks, AHeldLockTimesOutNamingItAndAStaleOneIsBroken) {
  testing::TempDir dir;
  auto store = open_file_store(dir.path());
  store->set_timeout(200ms);
  std::string lock = dir.path() + "/l.counter";
  {
    std::FILE* f = std::fopen(lock.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  std::string message;
  auto start = Clock::now();
  EXPECT_EQ(error_code_of([&] { store->add("counter", 1); }, &message), ErrorCode::Timeout);
  EXPECT_GE(Clock::now() - start, 190ms);
  EXPECT_NE(message.find("l.counter"), std::string::npos) << message;

  // A holder that died two minutes ago.
  timeval old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  ASSERT_EQ(::utimes(lock.c_str(), old), 0);
  EXPECT_EQ(store->add("counter", 1), 1);
  EXPECT_EQ(store->compare_set("counter", "1", "2"), "2");
}

TEST(FileStoreOpen, AFileInsteadOfADirectoryIsAConfigError) {
  testing::TempDir dir;
  std::string path = dir.path() + "/plain-file";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  EXPECT_EQ(error_code_of([&] { open_file_store(path); }), ErrorCode::Config);
  EXPECT_EQ(error_code_of([&] { open_file_store(""); }), ErrorCode::Config);
}

}  // namespace
}  // namespace canopy
