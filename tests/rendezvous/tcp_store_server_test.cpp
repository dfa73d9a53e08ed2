// The TcpStore server against hostile and failing clients: wrong tokens, garbage, oversized and
// truncated frames, clients killed mid-request, and its own shutdown while clients wait.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "rendezvous/store_protocol.hpp"
#include "tests/rendezvous/raw_connection.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
namespace proto = rendezvous::protocol;
using testing::RawConnection;

class TcpStoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "tok");
    bystander_ = connect();
    bystander_->set("before", "1");
  }
  std::shared_ptr<Store> connect(const std::string& token = "tok") {
    return connect_tcp_store("127.0.0.1", server_->port(), token, 5s);
  }
  // The server still serves a client that connected before the trouble, and a new one.
  void expect_still_serving() {
    EXPECT_EQ(bystander_->get("before", 1s), "1");
    auto fresh = connect();
    fresh->set("after", "2");
    EXPECT_EQ(bystander_->get("after", 1s), "2");
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> bystander_;
};

std::string request_with_field_length(proto::Command command, std::uint32_t length) {
  std::string bytes;
  proto::put_u32(bytes, 1);  // request id
  proto::put_u8(bytes, static_cast<std::uint8_t>(command));
  proto::put_u32(bytes, length);
  return bytes;
}

TEST_F(TcpStoreServerTest, WrongTokenIsRejectedWhileOthersKeepWorking) {
  try {
    connect("not-the-token");
    FAIL() << "a wrong token was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("job token"), std::string::npos) << e.what();
  }
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, GarbageInsteadOfAHelloIsDropped) {
  RawConnection http(server_->port());
  http.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(http.closed_by_server(2s));
  RawConnection huge_token(server_->port());
  std::string hello(proto::kMagic);
  proto::put_u16(hello, proto::kVersion);
  proto::put_u32(hello, 0xffffffffu);
  huge_token.send(hello);
  EXPECT_TRUE(huge_token.closed_by_server(2s));
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, UnknownCommandGetsAnErrorAndTheConnectionCloses) {
  RawConnection raw(server_->port());
  raw.hello();
  std::string unknown;
  proto::put_u32(unknown, 77);
  proto::put_u8(unknown, 0x7f);
  raw.send(unknown);
  std::string reply = raw.receive(proto::kReplyHeaderBytes, 2s);
  ASSERT_EQ(reply.size(), proto::kReplyHeaderBytes);
  EXPECT_EQ(proto::get_u32(reply.data()), 77u);  // the ERROR answers the request it is about
  EXPECT_EQ(reply[4], static_cast<char>(proto::Status::Error));
  EXPECT_TRUE(raw.closed_by_server(2s));
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, OversizedLengthFieldsAreRefusedBeforeAnyAllocation) {
  // A 4 GiB key, a 4 GiB value, a million keys: refused from the header alone, the bytes never sent.
  std::vector<std::string> requests;
  requests.push_back(request_with_field_length(proto::Command::Set, 0xffffffffu));
  std::string big_value = request_with_field_length(proto::Command::Set, 3);
  big_value += "key";
  proto::put_u32(big_value, static_cast<std::uint32_t>(proto::kMaxValueBytes + 1));
  requests.push_back(big_value);
  requests.push_back(request_with_field_length(proto::Command::Wait, 1'000'000));
  requests.push_back(request_with_field_length(proto::Command::GetMany, 1'000'000));
  requests.push_back(
      request_with_field_length(proto::Command::Get, static_cast<std::uint32_t>(proto::kMaxKeyBytes + 1)));
  for (const auto& request : requests) {
    RawConnection raw(server_->port());
    raw.hello();
    raw.send(request);
    std::string reply = raw.receive(proto::kReplyHeaderBytes, 2s);
    ASSERT_EQ(reply.size(), proto::kReplyHeaderBytes);
    EXPECT_EQ(reply[4], static_cast<char>(proto::Status::Error));
    EXPECT_TRUE(raw.closed_by_server(2s));
  }
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, TruncatedFramesAndRandomBytesDoNotDisturbOthers) {
  {
    RawConnection raw(server_->port());
    raw.hello();
    std::string partial = request_with_field_length(proto::Command::Set, 100);
    partial += "only part of the key";
    raw.send(partial);
    EXPECT_EQ(raw.receive(1, 200ms), "");  // the server waits for the rest...
  }                                        // ...and the client goes away mid-frame
  std::uint32_t seed = 12345;
  for (int connection = 0; connection < 20; ++connection) {
    RawConnection raw(server_->port());
    if (connection % 2 == 0) raw.hello();
    std::string noise;
    for (int i = 0; i < 512; ++i) {
      seed = seed * 1103515245 + 12345;
      noise.push_back(static_cast<char>(seed >> 16));
    }
    raw.send(noise);
  }
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, GetManyOverOneRepliesWorthOfValuesIsAnErrorAndTheConnectionStays) {
  const std::string half(proto::kMaxGetManyValueBytes / 2 + 1, 'v');
  bystander_->set("big/0", half);
  bystander_->set("big/1", half);
  try {
    bystander_->get_many({"big/0", "big/1"}, 5s);
    FAIL() << "a reply over the limit was sent";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fewer keys"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bystander_->get_many({"big/1", "before"}, 1s), (std::vector<std::string>{half, "1"}));
}

// Keys past what one GET_MANY may carry together (16 MiB) are asked for a batch at a time, still in order.
TEST_F(TcpStoreServerTest, GetManyBeyondOneRequestsKeysIsSplitByTheClient) {
  const std::size_t keys_per_request = proto::kMaxGetManyKeyBytes / proto::kMaxKeyBytes;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < keys_per_request + 100; ++i) {
    std::string key = fmt::format("{:0>{}}", i, proto::kMaxKeyBytes);
    bystander_->set(key, std::to_string(i));
    keys.push_back(std::move(key));
  }
  auto before = bystander_->requests_sent();
  auto values = bystander_->get_many(keys, 10s);
  EXPECT_EQ(bystander_->requests_sent() - before, 2u);
  ASSERT_EQ(values.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(values[i], std::to_string(i));
}

TEST_F(TcpStoreServerTest, RequestsSentCountsOneRoundTripPerCallAndBatch) {
  auto store = connect();
  EXPECT_EQ(store->requests_sent(), 0u);  // the hello is not a request
  store->set("a", "1");
  store->get("a", 1s);
  EXPECT_EQ(store->requests_sent(), 2u);
  store->get_many({"a", "a", "before"}, 1s);
  EXPECT_EQ(store->requests_sent(), 3u);
  std::vector<std::string> many(proto::kMaxKeysPerRequest + 1, "a");
  store->wait(many, 1s);  // two WAIT batches
  EXPECT_EQ(store->requests_sent(), 5u);
  EXPECT_THROW(store->get("never", 50ms), Error);  // a TIMEOUT answer is a round trip too
  EXPECT_EQ(store->requests_sent(), 6u);
  PrefixStore view(store, "round/0");
  view.set("b", "2");
  EXPECT_EQ(view.requests_sent(), 7u);
  EXPECT_EQ(store->requests_sent(), 7u);
  auto second = view.open_another(1s);
  second->get("b", 1s);
  EXPECT_EQ(second->requests_sent(), 1u);
  EXPECT_EQ(store->requests_sent(), 7u);
  testing::TempDir dir;
  EXPECT_EQ(open_file_store(dir.path())->requests_sent(), 0u);
}

TEST_F(TcpStoreServerTest, GetManyWaitsOnTheServerForKeysSetInAnyOrder) {
  constexpr int kRanks = 2000;
  std::vector<std::string> keys;
  for (int r = 0; r < kRanks; ++r) keys.push_back("addr/" + std::to_string(r));
  std::thread gatherer([&] {
    auto values = connect()->get_many(keys, 20s);
    ASSERT_EQ(values.size(), keys.size());
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(values[static_cast<std::size_t>(r)], std::to_string(r));
  });
  for (int r = kRanks; r-- > 0;) bystander_->set(keys[static_cast<std::size_t>(r)], std::to_string(r));
  gatherer.join();
}

TEST_F(TcpStoreServerTest, PipelinedRequestsThatDoNotWaitAreAnsweredInOrder) {
  RawConnection raw(server_->port());
  raw.hello();
  proto::Request set;
  set.id = 1;
  set.command = proto::Command::Set;
  set.keys = {"pipelined"};
  set.value = "v";
  proto::Request get;
  get.id = 2;
  get.command = proto::Command::Get;
  get.keys = {"pipelined"};
  get.timeout_ms = 1000;
  raw.send(proto::encode_request(set) + proto::encode_request(get));
  std::string expected = proto::encode_ok(1) + proto::encode_ok_bytes(2, "v");
  EXPECT_EQ(raw.receive(expected.size(), 2s), expected);
}

// A forked client killed by SIGKILL in the middle of a frame, another while the server holds its GET
// in a waiter list: the server forgets both and serves the rest.
TEST_F(TcpStoreServerTest, ClientsKilledMidRequestLeaveTheServerServing) {
  std::uint16_t port = server_->port();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  std::vector<pid_t> children;
  for (int kind = 0; kind < 2; ++kind) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (kind == 0) {
        RawConnection raw(port);
        raw.hello();
        std::string partial = request_with_field_length(proto::Command::Set, 1000);
        raw.send(partial + "abc");
        [[maybe_unused]] auto n = ::write(ready[1], "r", 1);
        ::pause();
      } else {
        auto store = connect_tcp_store("127.0.0.1", port, "tok", 5s);
        [[maybe_unused]] auto n = ::write(ready[1], "r", 1);
        store->get("never-set-by-anyone", 60s);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  char byte;
  for (std::size_t i = 0; i < children.size(); ++i) ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  std::this_thread::sleep_for(100ms);  // the GET reaches the server's waiter list
  for (pid_t pid : children) {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status));
  }
  ::close(ready[0]);
  ::close(ready[1]);
  bystander_->set("never-set-by-anyone", "now it is");  // wakes nobody who is gone
  expect_still_serving();
}

TEST_F(TcpStoreServerTest, DestructorWithWaitingClientsReturnsPromptlyAndTheyGetAnError) {
  constexpr int kWaiters = 8;
  std::vector<std::shared_ptr<Store>> waiters;
  for (int i = 0; i < kWaiters; ++i) waiters.push_back(connect());
  std::vector<std::thread> threads;
  std::vector<ErrorCode> codes(kWaiters, ErrorCode::System);
  std::vector<std::chrono::steady_clock::duration> waited(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto start = Clock::now();
      try {
        waiters[static_cast<std::size_t>(i)]->get("never", 60s);
      } catch (const Error& e) {
        codes[static_cast<std::size_t>(i)] = e.code();
      }
      waited[static_cast<std::size_t>(i)] = Clock::now() - start;
    });
  }
  std::this_thread::sleep_for(200ms);
  auto start = Clock::now();
  server_.reset();
  EXPECT_LT(Clock::now() - start, 5s);
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(codes[static_cast<std::size_t>(i)], ErrorCode::PeerFailed) << "waiter " << i;
    EXPECT_LT(waited[static_cast<std::size_t>(i)], 10s);
  }
  // And the connection stays failed, with a message naming the server.
  try {
    waiters[0]->set("x", "y");
    FAIL() << "a set on a dead server succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::PeerFailed);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:"), std::string::npos) << e.what();
  }
}

// The owner of a server that waits for every client's last SET and then destroys it (a rank 0 hosting the
// store at the end of a job): each of those SETs was handled, so each client gets its answer, not the
// close. Each client's SET follows an ADD at once, so that the server reads it while the ADD's reply may
// still be on its way out; the rounds give the race its chances.
TEST(TcpStoreServer, RepliesAlreadyMadeReachTheirClientsBeforeTheServerCloses) {
  constexpr int kRounds = 40;
  constexpr int kClients = 6;
  for (int round = 0; round < kRounds; ++round) {
    auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "tok");
    auto owner = connect_tcp_store("127.0.0.1", server->port(), "tok", 5s);
    std::vector<std::shared_ptr<Store>> clients;
    for (int i = 0; i < kClients; ++i)
      clients.push_back(connect_tcp_store("127.0.0.1", server->port(), "tok", 5s));
    std::vector<std::string> failures(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        try {
          clients[static_cast<std::size_t>(i)]->add("done", 1);
          clients[static_cast<std::size_t>(i)]->set("done/" + std::to_string(i), "");
        } catch (const Error& e) {
          failures[static_cast<std::size_t>(i)] = e.what();
        }
      });
    }
    std::vector<std::string> keys;
    for (int i = 0; i < kClients; ++i) keys.push_back("done/" + std::to_string(i));
    owner->wait(keys, 10s);
    server.reset();
    for (auto& t : threads) t.join();
    for (int i = 0; i < kClients; ++i)
      ASSERT_EQ(failures[static_cast<std::size_t>(i)], "") << "round " << round << ", client " << i;
  }
}

TEST(TcpStoreClient, NoServerIsATimeoutNamingHostAndPort) {
  std::uint16_t port;
  {
    TcpStoreServer probe("127.0.0.1", 0, "");
    port = probe.port();
  }
  auto start = Clock::now();
  try {
    connect_tcp_store("127.0.0.1", port, "", 300ms);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find(fmt::format("127.0.0.1:{}", port)), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(TcpStoreClient, ConnectRetriesUntilTheServerStarts) {
  std::uint16_t port;
  {
    TcpStoreServer probe("127.0.0.1", 0, "");
    port = probe.port();
  }
  std::shared_ptr<Store> client;
  std::thread early([&] { client = connect_tcp_store("127.0.0.1", port, "job", 20s); });
  std::this_thread::sleep_for(300ms);
  TcpStoreServer server("127.0.0.1", port, "job");
  early.join();
  ASSERT_TRUE(client);
  client->set("k", "v");
  EXPECT_EQ(client->get("k", 1s), "v");
}

TEST(TcpStoreClient, ResolvesHostNamesAndSpeaksIPv6) {
  TcpStoreServer dual_stack("", 0, "t");
  auto by_name = connect_tcp_store("localhost", dual_stack.port(), "t", 5s);
  by_name->set("k", "v");
  auto by_ipv4 = connect_tcp_store("127.0.0.1", dual_stack.port(), "t", 5s);
  EXPECT_EQ(by_ipv4->get("k", 1s), "v");

  std::unique_ptr<TcpStoreServer> v6;
  try {
    v6 = std::make_unique<TcpStoreServer>("::1", 0, "t");
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  auto by_ipv6 = connect_tcp_store("::1", v6->port(), "t", 5s);
  by_ipv6->set("six", "6");
  EXPECT_EQ(by_ipv6->get("six", 1s), "6");
  auto dual_by_ipv6 = connect_tcp_store("::1", dual_stack.port(), "t", 5s);
  EXPECT_EQ(dual_by_ipv6->get("k", 1s), "v");
}

TEST(TcpStoreClient, OversizedKeysAndValuesAreRefusedLocally) {
  TcpStoreServer server("127.0.0.1", 0, "t");
  auto store = connect_tcp_store("127.0.0.1", server.port(), "t", 5s);
  std::string long_key(proto::kMaxKeyBytes + 1, 'k');
  try {
    store->set(long_key, "v");
    FAIL() << "an oversized key was sent";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  std::string big_value(proto::kMaxValueBytes + 1, 'v');
  EXPECT_THROW(store->set("k", big_value), Error);
  store->set("k", "fine");  // the connection is still good
  EXPECT_EQ(store->get("k", 1s), "fine");
}

TEST(TcpStoreServer, AHostThatIsNotLocalOrAPortInUseIsAClearError) {
  TcpStoreServer first("127.0.0.1", 0, "t");
  try {
    TcpStoreServer second("127.0.0.1", first.port(), "t");
    FAIL() << "two servers on one port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos) << e.what();
  }
}

// A server that reads the hello and closes the connection: `keep_listening` tells apart one that speaks
// another protocol (it still accepts) from a store whose process is exiting (it no longer does).
Error hello_closed_by_a_server(bool keep_listening) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(::listen(listener, 8), 0);
  EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::thread server([&] {
    int connection = ::accept(listener, nullptr, nullptr);
    char hello[16];
    if (::read(connection, hello, sizeof(hello)) < 0) hello[0] = 0;
    if (!keep_listening) ::close(listener);
    ::close(connection);
  });
  std::optional<Error> error;
  try {
    connect_tcp_store("127.0.0.1", ntohs(address.sin_port), "token", 5s);
  } catch (const Error& e) {
    error = e;
  }
  server.join();
  if (keep_listening) ::close(listener);
  if (!error) throw std::runtime_error("the store client accepted a server that closed its hello");
  return *error;
}

TEST(TcpStoreClient, AServerThatClosesTheHelloButListensIsNotACanopyStore) {
  Error e = hello_closed_by_a_server(true);
  EXPECT_EQ(e.code(), ErrorCode::Protocol) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a Canopy TcpStore"), std::string::npos) << e.what();
}

TEST(TcpStoreClient, AStoreThatDiesDuringTheHelloIsUnreachable) {
  Error e = hello_closed_by_a_server(false);
  EXPECT_EQ(e.code(), ErrorCode::PeerFailed) << e.what();
  EXPECT_NE(std::string(e.what()).find("is unreachable"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("not a Canopy"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace canopy
