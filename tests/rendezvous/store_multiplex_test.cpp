// One TcpStore connection shared by many callers: requests that wait for keys are parked on the server
// while later ones are answered, replies come back out of order, and every caller gets its own answer, its
// own timeout, or the same clear error when the connection or the server dies.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "rendezvous/store_protocol.hpp"
#include "tests/rendezvous/raw_connection.hpp"
#include "tests/support/store_server_process.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
namespace proto = rendezvous::protocol;
using testing::RawConnection;

proto::Request get_request(std::uint32_t id, const std::string& key, std::uint64_t timeout_ms) {
  proto::Request request;
  request.id = id;
  request.command = proto::Command::Get;
  request.keys = {key};
  request.timeout_ms = timeout_ms;
  return request;
}

proto::Request set_request(std::uint32_t id, const std::string& key, const std::string& value) {
  proto::Request request;
  request.id = id;
  request.command = proto::Command::Set;
  request.keys = {key};
  request.value = value;
  return request;
}

struct RawReply {
  std::uint32_t id = 0;
  proto::Status status = proto::Status::Ok;
  std::string field;  // an OK GET's value, or a TIMEOUT / ERROR message
};

// A reply whose fields are one length-prefixed field (GET, TIMEOUT, ERROR) or none (`with_field` false).
RawReply read_reply(RawConnection& raw, bool with_field) {
  RawReply reply;
  std::string head = raw.receive(proto::kReplyHeaderBytes, 5s);
  if (head.size() != proto::kReplyHeaderBytes) throw std::runtime_error("no reply header");
  reply.id = proto::get_u32(head.data());
  reply.status = static_cast<proto::Status>(head[4]);
  if (with_field || reply.status != proto::Status::Ok) {
    std::string length = raw.receive(4, 5s);
    if (length.size() != 4) throw std::runtime_error("no field length");
    reply.field = raw.receive(proto::get_u32(length.data()), 5s);
  }
  return reply;
}

class StoreMultiplexTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "tok"); }
  std::shared_ptr<Store> connect() { return connect_tcp_store("127.0.0.1", server_->port(), "tok", 5s); }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(StoreMultiplexTest, SetsAndAddsOnOneHandleAreNotHeldBackByAWaitingGet) {
  auto store = connect();
  std::string got;
  std::thread waiter([&] { got = store->get("late", 10s); });
  std::this_thread::sleep_for(100ms);  // the GET is parked on the server
  auto start = Clock::now();
  for (int i = 0; i < 50; ++i) {
    store->set("key/" + std::to_string(i), "v");
    EXPECT_EQ(store->add("counter", 1), i + 1);
  }
  auto took = Clock::now() - start;
  EXPECT_LT(took, 500ms) << "100 requests took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  store->set("late", "here");
  waiter.join();
  EXPECT_EQ(got, "here");
}

// Threads on one handle, each with its own keys, some waiting for a key another thread sets: every caller
// gets its own reply, whoever holds the read role.
TEST_F(StoreMultiplexTest, ManyThreadsOnOneHandleEachGetTheirOwnReplies) {
  auto store = connect();
  constexpr int kThreads = 12;
  constexpr int kRounds = 150;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string mine = fmt::format("t{}/{}", t, i);
        store->set(mine, mine);
        if (store->get(mine, 5s) != mine) ++wrong;
        // Waits for the key the next thread sets in this round: parked until it comes.
        const std::string theirs = fmt::format("t{}/{}", (t + 1) % kThreads, i);
        if (store->get_many({theirs, mine}, 10s) != std::vector<std::string>{theirs, mine}) ++wrong;
        if (store->add(fmt::format("n{}", t), 1) != i + 1) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(store->requests_sent(), static_cast<std::uint64_t>(kThreads * kRounds * 4));
}

TEST_F(StoreMultiplexTest, RepliesComeBackOutOfOrderWithTheirRequestsIds) {
  RawConnection raw(server_->port());
  raw.hello();
  raw.send(proto::encode_request(get_request(1, "k", 5000)) +
           proto::encode_request(set_request(2, "other", "x")) +
           proto::encode_request(set_request(3, "k", "v")));
  RawReply first = read_reply(raw, false);
  EXPECT_EQ(first.id, 2u);
  EXPECT_EQ(first.status, proto::Status::Ok);
  RawReply second = read_reply(raw, false);
  EXPECT_EQ(second.id, 3u);
  RawReply third = read_reply(raw, true);
  EXPECT_EQ(third.id, 1u);
  EXPECT_EQ(third.status, proto::Status::Ok);
  EXPECT_EQ(third.field, "v");
}

TEST_F(StoreMultiplexTest, AParkedWaitTimesOutOnItsOwnWithoutDisturbingTheOthers) {
  auto store = connect();
  std::string later;
  std::thread patient([&] { later = store->get("later", 10s); });
  std::optional<Error> error;
  auto start = Clock::now();
  std::thread hasty([&] {
    try {
      store->get("never", 300ms);
    } catch (const Error& e) {
      error = e;
    }
  });
  hasty.join();
  auto took = Clock::now() - start;
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), ErrorCode::Timeout) << error->what();
  EXPECT_NE(std::string(error->what()).find("never"), std::string::npos) << error->what();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
  store->set("later", "still waited for");
  patient.join();
  EXPECT_EQ(later, "still waited for");
  EXPECT_EQ(store->add("n", 2), 2);
}

// A connection that leaves with waits parked frees them: the keys they waited on wake nobody, and a new
// connection may park as many.
TEST_F(StoreMultiplexTest, AConnectionClosedWithWaitsParkedFreesThemAndTheServerServesOn) {
  auto bystander = connect();
  {
    RawConnection raw(server_->port());
    raw.hello();
    std::string requests;
    for (std::uint32_t i = 0; i < proto::kMaxPendingWaitsPerConnection; ++i)
      requests += proto::encode_request(get_request(i + 1, "gone/" + std::to_string(i), 60000));
    raw.send(requests);
    EXPECT_EQ(raw.receive(1, 200ms), "");  // all parked
  }
  std::this_thread::sleep_for(100ms);  // the server sees the close
  for (std::size_t i = 0; i < proto::kMaxPendingWaitsPerConnection; ++i)
    bystander->set("gone/" + std::to_string(i), "v");
  RawConnection again(server_->port());
  again.hello();
  std::string requests;
  for (std::uint32_t i = 0; i < proto::kMaxPendingWaitsPerConnection; ++i)
    requests += proto::encode_request(get_request(i + 1, "new/" + std::to_string(i), 60000));
  requests += proto::encode_request(set_request(1000, "new/0", "w"));
  again.send(requests);
  RawReply set = read_reply(again, false);
  EXPECT_EQ(set.id, 1000u);
  RawReply woken = read_reply(again, true);
  EXPECT_EQ(woken.id, 1u);
  EXPECT_EQ(woken.field, "w");
  EXPECT_EQ(bystander->get("gone/3", 1s), "v");
}

TEST_F(StoreMultiplexTest, PendingWaitsPastTheBoundAreAnErrorAndTheConnectionStays) {
  RawConnection raw(server_->port());
  raw.hello();
  std::string requests;
  const auto most = static_cast<std::uint32_t>(proto::kMaxPendingWaitsPerConnection);
  for (std::uint32_t i = 1; i <= most + 1; ++i)
    requests += proto::encode_request(get_request(i, "never/" + std::to_string(i), 60000));
  requests += proto::encode_request(set_request(most + 2, "fine", "1"));
  raw.send(requests);
  RawReply refused = read_reply(raw, false);
  EXPECT_EQ(refused.id, most + 1);
  EXPECT_EQ(refused.status, proto::Status::Error);
  EXPECT_NE(refused.field.find(fmt::format("at most {}", most)), std::string::npos) << refused.field;
  RawReply set = read_reply(raw, false);
  EXPECT_EQ(set.id, most + 2);
  EXPECT_EQ(set.status, proto::Status::Ok);
}

TEST_F(StoreMultiplexTest, AVersionOneHelloGetsBadVersion) {
  RawConnection raw(server_->port());
  std::string hello(proto::kMagic);
  proto::put_u16(hello, 1);
  proto::put_bytes(hello, "tok");
  raw.send(hello);
  EXPECT_EQ(raw.receive(1, 2s), std::string(1, static_cast<char>(proto::HelloStatus::BadVersion)));
  EXPECT_TRUE(raw.closed_by_server(2s));
}

TEST_F(StoreMultiplexTest, OpenAnotherSharesTheConnectionAndCountsItsOwnRequests) {
  auto store = connect();
  auto another = store->open_another(2s);
  ASSERT_NE(another, nullptr);
  EXPECT_EQ(another->timeout(), 2s);
  std::string got;
  std::thread waiter([&] { got = store->get("late", 10s); });
  std::this_thread::sleep_for(50ms);
  another->set("late", "via the other handle");
  waiter.join();
  EXPECT_EQ(got, "via the other handle");
  EXPECT_EQ(store->requests_sent(), 1u);
  EXPECT_EQ(another->requests_sent(), 1u);
}

// Callers on one handle, each in its own wait: the server's death reaches every one of them promptly with
// the same clear error, and every later call too.
std::vector<Error> waiters_when(const std::shared_ptr<Store>& store, int n, Duration wait,
                                const std::function<void()>& trouble, std::vector<Clock::duration>& took) {
  std::vector<std::optional<Error>> errors(static_cast<std::size_t>(n));
  took.assign(static_cast<std::size_t>(n), {});
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto start = Clock::now();
      try {
        store->get("never/" + std::to_string(i), wait);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(i)] = e;
      }
      took[static_cast<std::size_t>(i)] = Clock::now() - start;
    });
  }
  std::this_thread::sleep_for(200ms);  // every GET parked
  trouble();
  for (auto& t : threads) t.join();
  std::vector<Error> result;
  for (auto& e : errors) result.push_back(e ? *e : Error(ErrorCode::System, "no error"));
  return result;
}

TEST(StoreMultiplexServerDeath, AKilledServerFailsEveryWaitingCallerAtOnceWithTheSameError) {
  testing::StoreServerProcess server("tok");
  auto store = connect_tcp_store("127.0.0.1", server.port(), "tok", 5s);
  std::vector<Clock::duration> took;
  auto start = Clock::now();
  auto errors = waiters_when(
      store, 6, 60s, [&] { ::kill(server.pid(), SIGKILL); }, took);
  EXPECT_LT(Clock::now() - start, 5s);
  // "get(never/3): the TcpStore at 127.0.0.1:port closed the connection ...": the same after the call.
  auto reason = [](const Error& e) {
    std::string what = e.what();
    return what.substr(what.find("): ") + 3);
  };
  for (std::size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].code(), ErrorCode::PeerFailed) << errors[i].what();
    EXPECT_NE(std::string(errors[i].what()).find(fmt::format("127.0.0.1:{}", server.port())),
              std::string::npos)
        << errors[i].what();
    EXPECT_EQ(reason(errors[i]), reason(errors[0]));
    EXPECT_LT(took[i], 5s);
  }
  try {
    store->set("x", "y");
    FAIL() << "a set on a dead server succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::PeerFailed);
    EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
  }
}

// A stopped server keeps the connection open and answers nothing: the first caller's deadline (its wait and
// the grace) ends every caller with a clear error, never a hang.
TEST(StoreMultiplexServerDeath, AStoppedServerIsDetectedByEveryCallerAtTheFirstDeadline) {
  testing::StoreServerProcess server("tok");
  auto store = connect_tcp_store("127.0.0.1", server.port(), "tok", 5s);
  std::vector<Clock::duration> took;
  auto errors = waiters_when(
      store, 3, 1s, [&] { ::kill(server.pid(), SIGSTOP); }, took);
  for (std::size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].code(), ErrorCode::Timeout) << errors[i].what();
    EXPECT_NE(std::string(errors[i].what()).find("is the server process alive"), std::string::npos)
        << errors[i].what();
    EXPECT_LT(took[i], 8s);
  }
  ::kill(server.pid(), SIGCONT);
}

// A request that hears nothing from the server for its whole deadline (a stopped server, a host cut off)
// fails the connection: a caller with a later deadline, and every later call, learn it at once instead of
// each waiting out its own deadline on a server known not to answer.
TEST(StoreMultiplexServerDeath, ARequestUnheardForItsWholeDeadlineEndsEveryCallerAtOnce) {
  testing::StoreServerProcess server("tok");
  auto store = connect_tcp_store("127.0.0.1", server.port(), "tok", 5s);
  store->set_timeout(1s);
  auto patient = store->open_another(30s);
  store->set("before", "answered");
  ::kill(server.pid(), SIGSTOP);
  std::this_thread::sleep_for(100ms);  // stopped before either request below reaches it
  std::optional<Error> patient_error;
  Clock::duration patient_took{};
  std::thread waiter([&] {
    const auto start = Clock::now();
    try {
      patient->set("late", "never answered");
    } catch (const Error& e) {
      patient_error = e;
    }
    patient_took = Clock::now() - start;
  });
  const auto start = Clock::now();
  try {
    store->set("first", "never answered");
    ADD_FAILURE() << "a set on a stopped server succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("is the server process alive"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 3s);
  waiter.join();
  ASSERT_TRUE(patient_error.has_value());
  EXPECT_EQ(patient_error->code(), ErrorCode::Timeout) << patient_error->what();
  EXPECT_NE(std::string(patient_error->what()).find("nothing came from it"), std::string::npos)
      << patient_error->what();
  EXPECT_LT(patient_took, 3s);  // not its own 30 s
  const auto later = Clock::now();
  EXPECT_THROW(patient->check({"before"}), Error);
  EXPECT_LT(Clock::now() - later, 100ms);
  ::kill(server.pid(), SIGCONT);
}

}  // namespace
}  // namespace canopy
