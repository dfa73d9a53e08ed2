// A 4-rank job forms through a TcpStore while a hostile process floods that store: hundreds of
// connections with random bytes, wrong tokens, lying length fields (a 4 GiB token, a 64 MiB value of
// which a few bytes arrive), truncated requests and silent sockets held open. The job must finish with
// exact results, the store must stay up, and its resident memory must stay bounded.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "rendezvous/store_protocol.hpp"
#include "tests/reliability/leak_check.hpp"
#include "tests/reliability/settings.hpp"
#include "tests/support/process_group.hpp"

namespace canopy::reliability {
namespace {

using testing::Clock;
using testing::ProcessGroup;
using testing::Reporter;

namespace protocol = rendezvous::protocol;

constexpr int kRanks = 4;
const std::string kToken = "reliability-test";

int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

void send_all(int fd, const std::string& bytes) {
  // MSG_NOSIGNAL: the store closing on us is expected, not a reason to die of SIGPIPE.
  for (std::size_t sent = 0; sent < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

// One hostile connection's first bytes.
std::string hostile_bytes(std::mt19937& random) {
  std::string out;
  switch (random() % 7) {
    case 0: {  // random bytes
      out.resize(1 + random() % 512);
      for (char& c : out) c = static_cast<char>(random());
      break;
    }
    case 1:  // a wrong token
      out = protocol::encode_hello("not-" + kToken);
      break;
    case 2:  // a hello announcing a 4 GiB token
      out = std::string(protocol::kMagic);
      protocol::put_u16(out, protocol::kVersion);
      protocol::put_u32(out, 0xFFFFFFFFu);
      break;
    case 3: {  // the right token, then a SET whose 64 MiB value never comes
      out = protocol::encode_hello(kToken);
      protocol::put_u8(out, static_cast<std::uint8_t>(protocol::Command::Set));
      protocol::put_bytes(out, "hostile/key");
      protocol::put_u32(out, static_cast<std::uint32_t>(protocol::kMaxValueBytes));
      out += "only a few bytes";
      break;
    }
    case 4: {  // the right token, then a key length beyond the limit
      out = protocol::encode_hello(kToken);
      protocol::put_u8(out, static_cast<std::uint8_t>(protocol::Command::Get));
      protocol::put_u32(out, 0x7FFFFFFFu);
      break;
    }
    case 5: {  // a truncated hello
      out = protocol::encode_hello(kToken);
      out.resize(random() % out.size());
      break;
    }
    default:  // nothing at all: a silent socket
      break;
  }
  return out;
}

// Floods the store at `port` until killed: keeps up to 200 hostile connections open, replacing the
// oldest with a new one.
void flood(std::uint16_t port) {
  std::mt19937 random(4242);
  std::vector<int> open;
  for (;;) {
    int fd = connect_to(port);
    if (fd >= 0) {
      send_all(fd, hostile_bytes(random));
      open.push_back(fd);
    }
    if (open.size() >= 200) {
      ::close(open.front());
      open.erase(open.begin());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

std::int32_t expected_sum(std::size_t j) {
  return kRanks * (kRanks + 1) / 2 * static_cast<std::int32_t>(1 + j % 5);
}

TEST(Hostile, FloodedStoreStillFormsTheJobWhichFinishesExactly) {
  testing::ScopedEnv env;
  use_loopback_only(env);
  ProcessGroup store(1, [&](int, const Reporter& reporter) {
    TcpStoreServer server("127.0.0.1", 0, kToken);
    reporter.ready(std::to_string(server.port()));
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until killed
  });
  ASSERT_TRUE(store.wait_ready({0}, Clock::now() + std::chrono::seconds(30)));
  ASSERT_FALSE(store.end(0).ended) << store.end(0).describe();
  const auto port = static_cast<std::uint16_t>(std::stoi(store.end(0).ready_detail));
  const long long store_rss_before = resident_bytes(store.pid(0));

  ProcessGroup hostile(1, [&](int, const Reporter&) { flood(port); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the flood is under way before the job

  ProcessGroup ranks(kRanks, [&](int rank, const Reporter& reporter) {
    auto options = test_communicator_options();
    options.timeout = std::chrono::seconds(30);  // the flood slows everything on 2 cores
    Communicator comm(connect_tcp_store("127.0.0.1", port, kToken, options.timeout), rank, kRanks, options);
    std::vector<std::int32_t> data;
    for (int call = 0; call < 200; ++call) {
      data.assign(static_cast<std::size_t>(1 + call * 37 % 5000), 0);
      for (std::size_t j = 0; j < data.size(); ++j)
        data[j] = (rank + 1) * static_cast<std::int32_t>(1 + j % 5);
      comm.all_reduce(std::span(data));
      for (std::size_t j = 0; j < data.size(); ++j)
        if (data[j] != expected_sum(j))
          throw std::runtime_error(fmt::format("call {}: element {} wrong", call, j));
    }
    reporter.outcome("ok");
  });
  long long store_rss_peak = store_rss_before;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!ranks.wait_ended({0, 1, 2, 3}, Clock::now() + std::chrono::milliseconds(50)) &&
         Clock::now() < deadline)
    store_rss_peak = std::max(store_rss_peak, resident_bytes(store.pid(0)));
  hostile.signal(0, SIGKILL);

  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(ranks.end(rank).ended && ranks.end(rank).outcome == "ok")
        << "rank " << rank << ": " << ranks.end(rank).describe();
  }
  EXPECT_GT(resident_bytes(store.pid(0)), 0) << "the store process died under the flood";
  fmt::print("[hostile] store resident memory {:.1f} MiB before the flood, at most {:.1f} MiB during it\n",
             store_rss_before / 1048576.0, store_rss_peak / 1048576.0);
  // 200 connections, each allowed at most the bytes that arrived: a few MiB. A server that trusted the
  // 64 MiB or 4 GiB length fields would show here (or die).
  // Under sanitizers freed blocks wait in a quarantine (256 MiB for ASan): report only.
  if (!kUnderSanitizer) {
    EXPECT_LT(store_rss_peak - store_rss_before, 64LL * 1048576) << "the store's memory grew with the flood";
  }
}

}  // namespace
}  // namespace canopy::reliability
