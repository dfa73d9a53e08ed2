// The TcpStore server with many clients at once: 2,000 connections making a bootstrap's requests, and
// what it holds per connection, measured on a server in a process of its own (its VmRSS is its alone).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "rendezvous/store_protocol.hpp"
#include "tests/rendezvous/raw_connection.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
using testing::require;
namespace proto = rendezvous::protocol;

// Raises the soft RLIMIT_NOFILE to the hard limit for the test's life (the server, forked after, inherits
// it); false when even the hard limit is below `needed`.
class DescriptorLimit {
 public:
  explicit DescriptorLimit(rlim_t needed) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit raised = saved_;
    raised.rlim_cur = saved_.rlim_max;
    enough_ = (raised.rlim_cur == RLIM_INFINITY || raised.rlim_cur >= needed) &&
              ::setrlimit(RLIMIT_NOFILE, &raised) == 0;
  }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool enough() const { return enough_; }
  rlim_t hard() const { return saved_.rlim_max; }

 private:
  rlimit saved_{};
  bool enough_ = false;
};

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// 2,000 clients at once, 50 on each of 40 threads: every rank claims its rank, publishes its address,
// reads its ring neighbour's and its tree parent's; rank 0 gathers all in one get_many. Each makes the
// requests the bootstrap makes, and each connection costs the server about a kilobyte, not the 64 KiB read
// buffer it once held.
TEST(TcpStoreAtScale, TwoThousandClientsMakeABootstrapsRequests) {
  constexpr int kClients = 2000;
  constexpr int kThreads = 40;
  DescriptorLimit limit(kClients + 200);
  if (!limit.enough())
    GTEST_SKIP() << kClients << " connections need " << kClients + 200
                 << " descriptors; RLIMIT_NOFILE's hard limit here is " << limit.hard();
  testing::StoreServerProcess server("tok");  // before any thread of this test exists
  const long idle_kib = rss_kib(server.pid());
  auto start = Clock::now();

  std::vector<std::shared_ptr<Store>> clients(kClients);
  auto address = [](int rank) { return "10.0.0." + std::to_string(rank) + ":29500"; };
  auto key = [](int rank) { return "addr/" + std::to_string(rank); };
  testing::run_threads(kThreads, [&](int thread) {
    for (int r = thread; r < kClients; r += kThreads) {
      auto store = connect_tcp_store("127.0.0.1", server.port(), "tok", 30s);
      store->set_timeout(30s);
      store->compare_set("rank/" + std::to_string(r), "", "client " + std::to_string(r));
      store->set(key(r), address(r));
      clients[static_cast<std::size_t>(r)] = std::move(store);
    }
  });
  const long connected_kib = rss_kib(server.pid());
  testing::run_threads(kThreads, [&](int thread) {
    for (int r = thread; r < kClients; r += kThreads) {
      Store& store = *clients[static_cast<std::size_t>(r)];
      const int next = (r + 1) % kClients, parent = (r - 1) / 2;
      require(store.get(key(next)) == address(next), "rank {} read its neighbour's address wrong", r);
      if (r > 0) require(store.get(key(parent)) == address(parent), "rank {} read its parent's wrong", r);
      if (r == 0) {
        std::vector<std::string> keys;
        for (int peer = 0; peer < kClients; ++peer) keys.push_back(key(peer));
        auto all = store.get_many(keys);
        for (int peer = 0; peer < kClients; ++peer)
          require(all[static_cast<std::size_t>(peer)] == address(peer), "rank 0 gathered rank {} wrong",
                  peer);
      }
      require(store.requests_sent() == 4, "rank {} made {} store requests, not 4", r, store.requests_sent());
    }
  });
  EXPECT_LT(Clock::now() - start, 60s);
  const double per_connection = (connected_kib - idle_kib) * 1024.0 / kClients;
  EXPECT_LT(per_connection, 16 * 1024) << "the server holds " << per_connection << " bytes a connection";
  clients.clear();
}

// One value every rank waits for (rank 0's answer) goes to all of them from the table's one buffer: 200
// readers that never read a 2 MiB answer cost the server kernel buffers, not 200 copies (400 MiB).
TEST(TcpStoreAtScale, AValueManyReadersWaitForIsHeldOnceNotOnceAReader) {
  constexpr int kReaders = 200;
  DescriptorLimit limit(kReaders + 200);
  if (!limit.enough()) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit here is " << limit.hard();
  testing::StoreServerProcess server("tok");
  proto::Request get;
  get.command = proto::Command::Get;
  get.keys = {"answer"};
  get.timeout_ms = 60000;
  // Raw connections that send their hello and the GET, then never read: readers that are slow, or gone
  // without closing.
  std::vector<std::unique_ptr<testing::RawConnection>> readers;
  for (int i = 0; i < kReaders; ++i)
    readers.emplace_back(std::make_unique<testing::RawConnection>(server.port()))
        ->send(proto::encode_hello("tok") + proto::encode_request(get));
  auto store = connect_tcp_store("127.0.0.1", server.port(), "tok", 10s);
  store->set("ready", "");
  std::this_thread::sleep_for(200ms);  // every GET has reached the server's waiter list
  const long before_kib = rss_kib(server.pid());
  store->set("answer", std::string(2 << 20, 'a'));
  store->get("ready", 5s);  // handled after the set's fan-out: the server has sent what it can
  const long after_kib = rss_kib(server.pid());
  EXPECT_LT(after_kib - before_kib, 64 * 1024) << "the server grew by " << after_kib - before_kib << " KiB";
}

}  // namespace
}  // namespace canopy
