// One TCP listener shared by a rank's meshes: each hello reaches the mesh it names (comm id and mesh
// number), whichever mesh's thread accepted it, and wakes that mesh's poll(); one for a mesh not formed yet
// waits for it, and is refused (so that its dialler retries) if it never comes; a stray that never finishes
// its hello is dropped without holding up the others; and a communicator's two meshes of lazy links and a
// sub-group's, all over one listener a rank, run side by side, each on a thread of its own.
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

constexpr std::uint64_t kComm = 7;

std::shared_ptr<TcpListener> loopback_listener(Duration handshake_timeout = std::chrono::seconds(2)) {
  UniqueFd fd = listen_on(SocketAddress::parse("127.0.0.1:0"), 256);  // the many-dials test fits
  std::string address = SocketAddress::local_of(fd.get()).to_string();
  return TcpListener::make(0, std::move(fd), std::move(address), handshake_timeout);
}

std::unique_ptr<TcpListener::Mesh> attach(TcpListener& listener, int mesh, std::uint64_t comm_id = kComm) {
  return listener.attach(comm_id, mesh, "the test's meshes");
}

// A blocking client that has sent `hello` for `mesh`, or the first `bytes` of it.
UniqueFd dial(const TcpListener& listener, int mesh, std::uint32_t rank, std::size_t bytes = ~std::size_t{0},
              std::uint64_t comm_id = kComm) {
  int error = 0;
  UniqueFd fd = start_connect(SocketAddress::parse(listener.address()), error);
  pollfd p{fd.get(), POLLOUT, 0};
  require(::poll(&p, 1, 5000) == 1, "connect to {} did not finish", listener.address());
  Hello hello;
  hello.comm_id = comm_id;
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
std::vector<TcpListener::Greeted> greeted_for(TcpListener::Mesh& mesh, std::size_t count, Duration limit) {
  std::vector<TcpListener::Greeted> greeted;
  const Deadline deadline = Deadline::after(limit);
  std::vector<pollfd> fds;
  mesh.drive(greeted);
  while (greeted.size() < count && !deadline.expired()) {
    fds.clear();
    Clock::time_point wake_by = deadline.at();
    mesh.prepare_to_block(fds, wake_by);
    ::poll(fds.data(), fds.size(), Deadline(wake_by).poll_timeout_ms());
    mesh.after_poll(fds);
    mesh.drive(greeted);
  }
  return greeted;
}

TEST(TcpListener, AHelloReachesTheMeshItNamesAndWakesItsPoll) {
  auto listener = loopback_listener();
  auto mesh0 = attach(*listener, 0), mesh1 = attach(*listener, 1);
  UniqueFd client = dial(*listener, 1, 5);
  // Mesh 0's thread accepts the connection and reads its hello: not its own.
  EXPECT_TRUE(greeted_for(*mesh0, 1, milliseconds(300)).empty());
  // Mesh 1's poll() wakes at once, for its doorbell alone: nothing else is waiting.
  std::vector<pollfd> fds;
  Clock::time_point wake_by = Clock::time_point::max();
  mesh1->prepare_to_block(fds, wake_by);
  const Clock::time_point before = Clock::now();
  ASSERT_EQ(::poll(fds.data(), fds.size(), 5000), 1);
  EXPECT_LT(Clock::now() - before, milliseconds(100));
  mesh1->after_poll(fds);
  std::vector<TcpListener::Greeted> greeted;
  mesh1->drive(greeted);
  ASSERT_EQ(greeted.size(), 1u);
  EXPECT_EQ(greeted[0].hello.rank, 5u);
  EXPECT_EQ(greeted[0].hello.mesh, 1);
  EXPECT_EQ(greeted[0].token, kToken);
  // The doorbell was drained: the next poll() sleeps.
  fds.clear();
  mesh1->prepare_to_block(fds, wake_by);
  EXPECT_EQ(::poll(fds.data(), fds.size(), 50), 0);
}

// A peer that formed the group first dials before this rank's mesh exists: the mesh finds it when it
// attaches.
TEST(TcpListener, AHelloForAMeshNotFormedYetWaitsForIt) {
  auto listener = loopback_listener();
  auto mesh0 = attach(*listener, 0);
  UniqueFd client = dial(*listener, 0, 2, ~std::size_t{0}, 99);
  EXPECT_TRUE(greeted_for(*mesh0, 1, milliseconds(300)).empty());
  auto later = attach(*listener, 0, 99);
  std::vector<TcpListener::Greeted> greeted;
  later->drive(greeted);
  ASSERT_EQ(greeted.size(), 1u);
  EXPECT_EQ(greeted[0].hello.comm_id, 99u);
  EXPECT_EQ(greeted[0].hello.rank, 2u);
}

// One that never comes: the dialler is told, with the status it retries on.
TEST(TcpListener, AHelloForAMeshNeverFormedIsRefusedAfterTheHandshakeTimeout) {
  auto listener = loopback_listener(milliseconds(200));
  auto mesh0 = attach(*listener, 0);
  UniqueFd client = dial(*listener, 7, 3);
  const Clock::time_point dialled = Clock::now();
  EXPECT_TRUE(greeted_for(*mesh0, 1, milliseconds(600)).empty());
  std::array<std::byte, kAckSize> ack{};
  pollfd p{client.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  ASSERT_EQ(::recv(client.get(), ack.data(), ack.size(), MSG_WAITALL), static_cast<ssize_t>(ack.size()));
  EXPECT_EQ(decode_ack(ack).status, AckStatus::NoSuchMesh);
  EXPECT_GE(Clock::now() - dialled, milliseconds(200));
}

TEST(TcpListener, AMeshIsAttachedOnce) {
  auto listener = loopback_listener();
  auto mesh = attach(*listener, 1);
  try {
    attach(*listener, 1);
    FAIL() << "a second attach of mesh 1 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  EXPECT_EQ(listener->meshes(), 1);  // the failed attach took nothing of the first's
}

TEST(TcpListener, AStrayThatNeverFinishesItsHelloIsDroppedAndOthersGoOn) {
  log::set_level(log::Level::Error);  // the drop is expected
  auto listener = loopback_listener(milliseconds(200));
  auto mesh = attach(*listener, 0);
  UniqueFd stray = dial(*listener, 0, 1, 10);  // 10 of the hello's bytes, then silence
  UniqueFd peer = dial(*listener, 0, 2);
  auto greeted = greeted_for(*mesh, 1, std::chrono::seconds(5));
  ASSERT_EQ(greeted.size(), 1u);
  EXPECT_EQ(greeted[0].hello.rank, 2u);
  // The stray's connection is closed once its time is up.
  EXPECT_TRUE(greeted_for(*mesh, 1, milliseconds(500)).empty());
  char byte = 0;
  pollfd p{stray.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_EQ(::recv(stray.get(), &byte, 1, 0), 0) << "the stray's connection is still open";
  log::set_level(log::Level::Warn);
}

TEST(TcpListener, TwoThreadsTakeManyConnectionsEachForItsOwnMesh) {
  constexpr int kPerMesh = 40;
  auto listener = loopback_listener();
  std::unique_ptr<TcpListener::Mesh> meshes[2] = {attach(*listener, 0), attach(*listener, 1)};
  std::vector<TcpListener::Greeted> got[2];
  std::thread threads[2];
  for (int m = 0; m < 2; ++m)
    threads[m] =
        std::thread([&, m] { got[m] = greeted_for(*meshes[m], kPerMesh, std::chrono::seconds(20)); });
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 2 * kPerMesh; ++i)
    clients.push_back(dial(*listener, i % 2, static_cast<std::uint32_t>(i)));
  for (auto& t : threads) t.join();
  for (int m = 0; m < 2; ++m) {
    ASSERT_EQ(got[m].size(), static_cast<std::size_t>(kPerMesh)) << "mesh " << m;
    for (const auto& g : got[m]) EXPECT_EQ(static_cast<int>(g.hello.rank % 2), m);
  }
}

// Ten steps of a ring on `t`, each message saying whose it is.
void ring(Transport& t, std::uint64_t comm_id, std::uint64_t tag) {
  const int size = t.size(), rank = t.rank();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  for (std::uint64_t step = 1; step <= 10; ++step) {
    std::array<std::uint64_t, 3> out{static_cast<std::uint64_t>(rank), step, tag}, in{};
    auto envelope = testing::p2p_envelope(comm_id, step);
    testing::wait_all(t, {t.post_send(next, envelope, std::as_bytes(std::span(out))),
                          t.post_recv(previous, envelope, std::as_writable_bytes(std::span(in)))});
    require(in[0] == static_cast<std::uint64_t>(previous) && in[1] == step && in[2] == tag,
            "rank {} of {} (tag {}) got {} {} {}", rank, size, tag, in[0], in[1], in[2]);
  }
}

std::unique_ptr<MeshTransport> lazy_mesh(Store& store, int rank, int size, TcpOptions options) {
  auto mesh = std::make_unique<MeshTransport>(rank, size, "tcp");
  mesh->add_part(
      std::make_unique<TcpLinks>(rank, size, form_tcp_links(store, rank, size, options), mesh->abort_state()),
      std::chrono::microseconds(0));
  return mesh;
}

// A communicator's two meshes of links on first use over its address book, and a sub-group of the even
// ranks over a view of it, as Communicator forms them: each runs a ring on a thread of its own, all at
// once, through one listener a rank.
TEST(TcpListener, ACommunicatorsMeshesAndASubGroupsShareOneListenerPerRank) {
  constexpr int kSize = 6;
  constexpr std::uint64_t kWorld = 90, kEven = 91;
  auto store = std::make_shared<testing::MemoryStore>();
  auto key_of = [](int rank) { return "record/" + std::to_string(rank); };
  auto address_in = [](const std::string& record, int) { return record; };
  testing::run_threads(kSize, [&](int rank) {
    TcpOptions options = testing::loopback_options(kWorld);
    options.store_for_first_use = store;
    auto book = std::make_shared<TcpAddressBook>(rank, kSize, 2, options,
                                                 TcpAddressBook::Records{store, key_of, address_in});
    store->set(key_of(rank), book->address());
    options.address_book = book;
    std::vector<std::unique_ptr<MeshTransport>> meshes;
    std::vector<std::uint64_t> comm_of;
    for (int m = 0; m < 2; ++m) {
      options.address_book_mesh = m;
      meshes.push_back(lazy_mesh(*store, rank, kSize, options));
      comm_of.push_back(kWorld);
    }
    if (rank % 2 == 0) {
      TcpOptions even = options;
      even.comm_id = kEven;
      even.address_book = std::make_shared<TcpAddressBook>(book, std::vector<int>{0, 2, 4});
      even.address_book_mesh = 0;
      meshes.push_back(lazy_mesh(*store, rank / 2, 3, even));
      comm_of.push_back(kEven);
    }
    std::vector<std::thread> others;
    for (std::size_t m = 1; m < meshes.size(); ++m)
      others.emplace_back([&, m] { ring(*meshes[m], comm_of[m], m); });
    ring(*meshes[0], kWorld, 0);
    for (auto& t : others) t.join();
  });
}

}  // namespace
}  // namespace canopy::transport
