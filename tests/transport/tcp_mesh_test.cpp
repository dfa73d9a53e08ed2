// Forming the mesh: sizes 2..5 as threads, IPv6, stray and hostile connections, missing ranks, wrong tokens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/tcp/handshake.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

using testing::exchange_with_everyone;
using testing::loopback_options;
using testing::MemoryStore;
using testing::require;

TEST(TcpMesh, FormsAndWorksWithTwoToFiveRanksAsThreads) {
  for (int size = 1; size <= 5; ++size) {
    MemoryStore store;
    testing::run_threads(size, [&](int rank) {
      auto t = connect_tcp_mesh(store, rank, size, loopback_options(100 + size));
      require(t->rank() == rank && t->size() == size, "rank/size wrong");
      exchange_with_everyone(*t, 100 + size);
    });
  }
}

TEST(TcpMesh, WorksOverIpv6Loopback) {
  auto interfaces = list_interfaces();
  bool has_v6_loopback = false;
  for (const auto& i : interfaces) has_v6_loopback |= i.loopback && i.address.family() == AF_INET6;
  if (!has_v6_loopback) GTEST_SKIP() << "no IPv6 address on the loopback interface (::1) on this machine";
  MemoryStore store;
  testing::run_threads(3, [&](int rank) {
    auto options = loopback_options(7);
    options.socket_family = "ipv6";
    auto t = connect_tcp_mesh(store, rank, 3, options);
    require(store.get(tcp_address_key(7, rank)).starts_with("[::1]:"), "rank {} did not publish ::1", rank);
    exchange_with_everyone(*t, 7);
  });
}

// A raw client that reports what the listening rank did with it.
class StrayClient {
 public:
  explicit StrayClient(const std::string& address) {
    int error = 0;
    fd_ = start_connect(SocketAddress::parse(address), error);
    if (error == EINPROGRESS) {
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 5000);
    }
  }
  void send_bytes(std::span<const std::byte> bytes) {
    ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // Reads until the peer closes (or 10 s pass); returns everything read.
  std::vector<std::byte> read_until_closed() {
    std::vector<std::byte> all;
    auto give_up = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < give_up) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      std::byte buffer[256];
      ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        closed_ = true;
        break;
      }
      if (n > 0) all.insert(all.end(), buffer, buffer + n);
    }
    return all;
  }
  bool closed() const { return closed_; }

 private:
  UniqueFd fd_;
  bool closed_ = false;
};

TEST(TcpMesh, DropsStrayConnectionsAndStillCompletes) {
  constexpr std::uint64_t kComm = 31;
  MemoryStore store;
  std::promise<void> strays_done;
  auto strays_done_future = strays_done.get_future().share();
  log::set_level(log::Level::Error);  // the drops are expected: keep the test output readable

  std::thread strays([&] {
    try {
      std::string rank0 = store.get(tcp_address_key(kComm, 0), std::chrono::seconds(10));
      std::string rank1 = store.get(tcp_address_key(kComm, 1), std::chrono::seconds(10));

      StrayClient wrong_token(rank0);
      wrong_token.send_bytes(encode_hello(Hello{.comm_id = kComm, .rank = 2, .size = 3}, "not-the-token"));
      StrayClient wrong_comm(rank1);
      wrong_comm.send_bytes(
          encode_hello(Hello{.comm_id = kComm + 1, .rank = 2, .size = 3}, "transport-test-token"));
      StrayClient garbage(rank0);
      std::string junk = "GET / HTTP/1.0\r\nHost: scanner\r\n\r\n";
      garbage.send_bytes(std::as_bytes(std::span(junk)));
      StrayClient silent(rank1);
      StrayClient scanner(rank0);  // connects and goes away at once
      { StrayClient closes_at_once(rank1); }

      auto answer = wrong_token.read_until_closed();
      EXPECT_EQ(answer.size(), kAckSize) << "wrong token: no refusal";
      EXPECT_TRUE(wrong_token.closed()) << "wrong token: not closed";
      if (answer.size() == kAckSize) {
        EXPECT_EQ(decode_ack(std::span<const std::byte, kAckSize>(answer.data(), kAckSize)).status,
                  AckStatus::WrongToken);
      }
      // Another comm's hello waits for that mesh to be formed here, and is refused once its time is up.
      answer = wrong_comm.read_until_closed();
      EXPECT_EQ(answer.size(), kAckSize) << "wrong comm: no refusal";
      if (answer.size() == kAckSize) {
        EXPECT_EQ(decode_ack(std::span<const std::byte, kAckSize>(answer.data(), kAckSize)).status,
                  AckStatus::NoSuchMesh);
      }
      EXPECT_TRUE(wrong_comm.closed());
      garbage.read_until_closed();
      EXPECT_TRUE(garbage.closed()) << "garbage connection was not closed";
      silent.read_until_closed();
      EXPECT_TRUE(silent.closed()) << "silent connection was not closed after the handshake deadline";
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stray client: " << e.what();
    }
    strays_done.set_value();
  });

  testing::run_threads(3, [&](int rank) {
    auto options = loopback_options(kComm);
    options.handshake_timeout = std::chrono::milliseconds(300);
    // Rank 2 joins only once every stray has been dealt with, so they all arrive while the mesh forms.
    if (rank == 2) strays_done_future.wait();
    auto t = connect_tcp_mesh(store, rank, 3, options);
    exchange_with_everyone(*t, kComm);
  });
  strays.join();
  log::set_level(log::Level::Warn);
}

TEST(TcpMesh, TimeoutNamesTheRankThatNeverCame) {
  MemoryStore store;
  std::vector<std::string> errors(4);
  std::vector<ErrorCode> codes(4, ErrorCode::InvalidArgument);
  testing::run_threads(4, [&](int rank) {
    if (rank == 2) return;  // never shows up
    auto options = loopback_options(41);
    options.connect_timeout = std::chrono::milliseconds(600);
    try {
      connect_tcp_mesh(store, rank, 4, options);
      errors[rank] = "no error";
    } catch (const Error& e) {
      errors[rank] = e.what();
      codes[rank] = e.code();
    }
  });
  for (int rank : {0, 1}) {
    EXPECT_NE(errors[rank].find("ranks 2 never connected"), std::string::npos) << errors[rank];
    EXPECT_EQ(codes[rank], ErrorCode::Timeout) << errors[rank];
  }
  EXPECT_NE(errors[3].find("rank 2 never published its address"), std::string::npos) << errors[3];
  EXPECT_EQ(codes[3], ErrorCode::Timeout) << errors[3];
}

TEST(TcpMesh, RankWithAnotherTokenIsRefusedWithAClearError) {
  MemoryStore store;
  std::vector<std::string> errors(2);
  log::set_level(log::Level::Error);
  testing::run_threads(2, [&](int rank) {
    auto options = loopback_options(51, rank == 1 ? "other-token" : "transport-test-token");
    options.connect_timeout = std::chrono::milliseconds(800);
    try {
      connect_tcp_mesh(store, rank, 2, options);
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  log::set_level(log::Level::Warn);
  EXPECT_NE(errors[1].find("refused the connection"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("CANOPY_JOB_TOKEN"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("ranks 1 never connected"), std::string::npos) << errors[0];
}

TEST(TcpMesh, RejectsBadArguments) {
  MemoryStore store;
  EXPECT_THROW(connect_tcp_mesh(store, 2, 2, loopback_options(1)), Error);
  EXPECT_THROW(connect_tcp_mesh(store, -1, 2, loopback_options(1)), Error);
  auto options = loopback_options(1);
  options.socket_ifname = "=no-such-interface";
  try {
    connect_tcp_mesh(store, 0, 2, options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
  }
}

}  // namespace
}  // namespace canopy::transport
