// canopy_torch's Store over torch's own (python/c10d_store.cpp), against a real c10d::TCPStore server of
// this process: a bounded wait that runs out leaves the connection as it was.
#include "python/c10d_store.hpp"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <string>

#include "common/error.hpp"

namespace canopy::pytorch {
namespace {

using namespace std::chrono_literals;

c10::intrusive_ptr<c10d::TCPStore> tcp_store(bool server, std::uint16_t port) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = server;
  options.waitWorkers = false;
  options.timeout = 5s;  // a client that lost its place in the stream fails in 5 s, not torch's 30 min
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

// torch 1.13's TCPStore answers a wait that timed out once its key comes, on the same connection: had the
// wait below been c10d's own, the get after it would read that stale answer as the length of its value.
TEST(C10dStore, AWaitThatRanOutLeavesTheConnectionInStep) {
  auto server = tcp_store(true, 0);
  auto other_client = tcp_store(false, server->getPort());
  C10dStore store(c10::make_intrusive<c10d::PrefixStore>("job", tcp_store(false, server->getPort())));
  c10d::PrefixStore writer("job", other_client);

  const std::string value(100'000, 'v');  // larger than one segment: a length read wrong waits for more
  writer.set("present", as_bytes(value));
  try {
    store.get("late", 20ms);
    FAIL() << "a key nobody set was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("'late'"), std::string::npos) << e.what();
  }
  writer.set("late", as_bytes("now"));  // a waiter still registered would be answered now
  EXPECT_EQ(store.get("present", 1s), value);
  EXPECT_EQ(store.get("late", 1s), "now");
  EXPECT_THROW(store.wait({"never"}, 20ms), Error);
  writer.set("never", as_bytes("after all"));
  EXPECT_EQ(store.get("present", 1s), value);
}

TEST(C10dStore, AWaitReturnsOnceEveryKeyIsThere) {
  auto server = tcp_store(true, 0);
  C10dStore store(tcp_store(false, server->getPort()));
  auto writer = tcp_store(false, server->getPort());
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    writer->set("a", as_bytes("1"));
    writer->set("b", as_bytes("2"));
  });
  const auto start = std::chrono::steady_clock::now();
  store.wait({"a", "b"}, 10s);
  later.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(store.get("b", 0ms), "2");
}

}  // namespace
}  // namespace canopy::pytorch
