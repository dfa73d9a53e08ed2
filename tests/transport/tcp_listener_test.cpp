// One TCP listener shared by a communicator's meshes: each hello reaches the mesh it names, whichever mesh's
// thread accepted it, and wakes that mesh's poll(); a hello naming no mesh is refused with a reason; a
// stray that never finishes its hello is dropped without holding up the others; and two meshes of lazy
// links over one listener run side by side, each on a thread of its own.
#include "transport/tcp/tcp_listener.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/tcp/tcp_address_book.hpp"
#include "transport/tcp/tcp_links.hpp"

namespace canopy::transport {
namespace {

using std::chrono::milliseconds;
using testing::require;

const std::string kToken = "listener-test-token";

std::shared_ptr<TcpListener> loopback_listener(int meshes,
                                               Duration handshake_timeout = std::chrono::seconds(2)) {
  UniqueFd fd = listen_on(SocketAddress::parse("127.0.0.1:0"), 64);
  std::string address = SocketAddress::local_of(fd.get()).to_string();
  return std::make_shared<TcpListener>(0, std::move(fd), std::move(address), meshes, handshake_timeout,
                                       "the test's listener");
}

// A blocking client that has sent `hello` for `mesh`, or the first `bytes` of it.
UniqueFd dial(const TcpListener& listener, int mesh, std::uint32_t rank,
              std::size_t bytes = ~std::size_t{0}) {
  int error = 0;
  UniqueFd fd = start_connect(SocketAddress::parse(listener.address()), error);
  pollfd p{fd.get(), POLLOUT, 0};
  require(::poll(&p, 1, 5000) == 1, "connect to {} did not finish", listener.address());
  Hello hello;
  hello.comm_id = 7;
  hello.rank = rank;
  hello.size = 64;
  hello.mesh = static_cast<std::uint8_t>(mesh);
  std::vector<std::byte> bytes_out = encode_hello(hello, kToken);
  bytes_out.resize(std::min(bytes, bytes_out.size()));
  require(::send(fd.get(), bytes_out.data(), bytes_out.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(bytes_out.size()),
          "sending the hello failed");
  return fd;
}

// Polls and drives `mesh` as its TcpConnector would, until `count` connections were greeted for it or
// `limit` passed.
std::vector<TcpListener::Greeted> greeted_for(TcpListener& listener, int mesh, std::size_t count,
                                              Duration limit) {
  std::vector<TcpListener::Greeted> greeted;
  const Deadline deadline = Deadline::after(limit);
  std::vector<pollfd> fds;
  listener.drive(mesh, greeted);
  while (greeted.size() < count && !deadline.expired()) {
    fds.clear();
    Clock::time_point wake_by = deadline.at();
    listener.prepare_to_block(mesh, fds, wake_by);
    ::poll(fds.data(), fds.size(), Deadline(wake_by).poll_timeout_ms());
    listener.after_poll(mesh, fds);
    listener.drive(mesh, greeted);
  }
  return greeted;
}

TEST(TcpListener, AHelloReachesTheMeshItNamesAndWakesItsPoll) {
  auto listener = loopback_listener(2);
  UniqueFd client = dial(*listener, 1, 5);
  // Mesh 0's thread accepts the connection and reads its hello: not its own.
  EXPECT_TRUE(greeted_for(*listener, 0, 1, milliseconds(300)).empty());
  // Mesh 1's poll() wakes at once, for its doorbell alone: nothing else is waiting.
  std::vector<pollfd> fds;
  Clock::time_point wake_by = Clock::time_point::max();
  listener->prepare_to_block(1, fds, wake_by);
  const Clock::time_point before = Clock::now();
  ASSERT_EQ(::poll(fds.data(), fds.size(), 5000), 1);
  EXPECT_LT(Clock::now() - before, milliseconds(100));
  listener->after_poll(1, fds);
  std::vector<TcpListener::Greeted> greeted;
  listener->drive(1, greeted);
  ASSERT_EQ(greeted.size(), 1u);
  EXPECT_EQ(greeted[0].hello.rank, 5u);
  EXPECT_EQ(greeted[0].hello.mesh, 1);
  EXPECT_EQ(greeted[0].token, kToken);
  // The doorbell was drained: the next poll() sleeps.
  fds.clear();
  listener->prepare_to_block(1, fds, wake_by);
  EXPECT_EQ(::poll(fds.data(), fds.size(), 50), 0);
}

TEST(TcpListener, AHelloNamingNoMeshIsAnsweredWithTheReason) {
  log::set_level(log::Level::Error);  // the refusal is expected
  auto listener = loopback_listener(2);
  UniqueFd client = dial(*listener, 7, 3);
  EXPECT_TRUE(greeted_for(*listener, 0, 1, milliseconds(300)).empty());
  std::array<std::byte, kAckSize> ack{};
  pollfd p{client.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ASSERT_EQ(::recv(client.get(), ack.data(), ack.size(), MSG_WAITALL), static_cast<ssize_t>(ack.size()));
  EXPECT_EQ(decode_ack(ack).status, AckStatus::NoSuchMesh);
  log::set_level(log::Level::Warn);
}

TEST(TcpListener, AStrayThatNeverFinishesItsHelloIsDroppedAndOthersGoOn) {
  log::set_level(log::Level::Error);  // the drop is expected
  auto listener = loopback_listener(1, milliseconds(200));
  UniqueFd stray = dial(*listener, 0, 1, 10);  // 10 of the hello's bytes, then silence
  UniqueFd peer = dial(*listener, 0, 2);
  auto greeted = greeted_for(*listener, 0, 1, std::chrono::seconds(5));
  ASSERT_EQ(greeted.size(), 1u);
  EXPECT_EQ(greeted[0].hello.rank, 2u);
  // The stray's connection is closed once its time is up.
  EXPECT_TRUE(greeted_for(*listener, 0, 1, milliseconds(500)).empty());
  char byte = 0;
  pollfd p{stray.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_EQ(::recv(stray.get(), &byte, 1, 0), 0) << "the stray's connection is still open";
  log::set_level(log::Level::Warn);
}

TEST(TcpListener, TwoThreadsTakeManyConnectionsEachForItsOwnMesh) {
  constexpr int kPerMesh = 40;
  auto listener = loopback_listener(2);
  std::vector<TcpListener::Greeted> got[2];
  std::thread threads[2];
  for (int mesh = 0; mesh < 2; ++mesh)
    threads[mesh] = std::thread(
        [&, mesh] { got[mesh] = greeted_for(*listener, mesh, kPerMesh, std::chrono::seconds(20)); });
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 2 * kPerMesh; ++i)
    clients.push_back(dial(*listener, i % 2, static_cast<std::uint32_t>(i)));
  for (auto& t : threads) t.join();
  for (int mesh = 0; mesh < 2; ++mesh) {
    ASSERT_EQ(got[mesh].size(), static_cast<std::size_t>(kPerMesh)) << "mesh " << mesh;
    for (const auto& g : got[mesh]) EXPECT_EQ(static_cast<int>(g.hello.rank % 2), mesh);
  }
}

// Two meshes of links on first use over one address book, as a communicator's collectives and
// point-to-point meshes are: each runs a ring on a thread of its own, at once, and every rank listens once.
TEST(TcpListener, TwoMeshesOfLazyLinksShareOneListenerPerRank) {
  constexpr int kSize = 6;
  constexpr std::uint64_t kComm = 90;
  auto store = std::make_shared<testing::MemoryStore>();
  auto key_of = [](int rank) { return "record/" + std::to_string(rank); };
  auto address_in = [](const std::string& record, int) { return record; };
  testing::run_threads(kSize, [&](int rank) {
    TcpOptions options = testing::loopback_options(kComm);
    options.store_for_first_use = store;
    auto book = std::make_shared<TcpAddressBook>(rank, kSize, 2, options,
                                                 TcpAddressBook::Records{store, key_of, address_in});
    store->set(key_of(rank), book->address());
    options.address_book = book;
    std::unique_ptr<MeshTransport> meshes[2];
    for (int m = 0; m < 2; ++m) {
      options.address_book_mesh = m;
      meshes[m] = std::make_unique<MeshTransport>(rank, kSize, "tcp");
      meshes[m]->add_part(
          std::make_unique<TcpLinks>(rank, kSize, form_tcp_links(*store, rank, kSize, options),
                                     meshes[m]->abort_state()),
          std::chrono::microseconds(0));
    }
    auto ring = [&](int m) {
      Transport& t = *meshes[m];
      const int next = (rank + 1) % kSize, previous = (rank + kSize - 1) % kSize;
      for (std::uint64_t step = 1; step <= 10; ++step) {
        std::array<std::uint64_t, 3> out{static_cast<std::uint64_t>(rank), step,
                                         static_cast<std::uint64_t>(m)};
        std::array<std::uint64_t, 3> in{};
        auto envelope = testing::p2p_envelope(kComm, step);
        testing::wait_all(t, {t.post_send(next, envelope, std::as_bytes(std::span(out))),
                              t.post_recv(previous, envelope, std::as_writable_bytes(std::span(in)))});
        require(in[0] == static_cast<std::uint64_t>(previous) && in[1] == step &&
                    in[2] == static_cast<std::uint64_t>(m),
                "rank {} mesh {} got {} {} {}", rank, m, in[0], in[1], in[2]);
      }
    };
    std::thread other([&] { ring(1); });
    ring(0);
    other.join();
  });
}

}  // namespace
}  // namespace canopy::transport
