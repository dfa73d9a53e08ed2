// Connections on first use: a ring makes 2 links a rank and every peer at most one, later messages make
// none and read nothing from the store, either rank of a pair may send first, and a peer that is gone or
// refuses is a clear error.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <memory>
#include <vector>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/tcp/tcp_links.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

using testing::exchange_with_everyone;
using testing::MemoryStore;
using testing::require;

// A mesh whose TCP links are made on first use, with a view of its links for counting them.
struct LazyMesh {
  std::unique_ptr<MeshTransport> mesh;
  TcpLinks* links = nullptr;
};

LazyMesh lazy_mesh(const std::shared_ptr<Store>& store, int rank, int size, std::uint64_t comm_id,
                   TcpOptions options) {
  options.comm_id = comm_id;
  options.store_for_first_use = store;
  LazyMesh lazy;
  lazy.mesh = std::make_unique<MeshTransport>(rank, size, "tcp");
  auto links = std::make_unique<TcpLinks>(rank, size, form_tcp_links(*store, rank, size, options),
                                          lazy.mesh->abort_state());
  lazy.links = links.get();
  lazy.mesh->add_part(std::move(links), std::chrono::microseconds(0));
  return lazy;
}

LazyMesh lazy_mesh(const std::shared_ptr<Store>& store, int rank, int size, std::uint64_t comm_id) {
  return lazy_mesh(store, rank, size, comm_id, testing::loopback_options(comm_id));
}

// One step of a ring: send to the next rank, receive from the previous one, check what came.
void ring_step(Transport& t, std::uint64_t comm_id, std::uint64_t step) {
  const int size = t.size(), rank = t.rank();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  std::array<std::uint64_t, 2> out{static_cast<std::uint64_t>(rank), step}, in{};
  auto envelope = testing::p2p_envelope(comm_id, step);
  testing::wait_all(t, {t.post_send(next, envelope, std::as_bytes(std::span(out))),
                        t.post_recv(previous, envelope, std::as_writable_bytes(std::span(in)))});
  require(in[0] == static_cast<std::uint64_t>(previous) && in[1] == step, "rank {} got {} step {} from rank {}",
          rank, in[0], in[1], previous);
}

TEST(ConnectOnFirstUse, FormingMakesNoConnection) {
  constexpr int kSize = 5;
  auto store = std::make_shared<MemoryStore>();
  testing::run_threads(kSize, [&](int rank) {
    LazyMesh lazy = lazy_mesh(store, rank, kSize, 61);
    require(lazy.links->connected_peers() == 0, "rank {} holds {} links before any message", rank,
            lazy.links->connected_peers());
  });
}

TEST(ConnectOnFirstUse, ARingHoldsTwoLinksAndLaterStepsNeedNeitherConnectsNorTheStore) {
  constexpr int kSize = 6;
  constexpr std::uint64_t kComm = 62;
  auto store = std::make_shared<MemoryStore>();
  std::barrier first_step_done(kSize), addresses_gone(kSize);
  testing::run_threads(kSize, [&](int rank) {
    LazyMesh lazy = lazy_mesh(store, rank, kSize, kComm);
    ring_step(*lazy.mesh, kComm, 1);
    require(lazy.links->connected_peers() == 2, "rank {} holds {} links after a ring step", rank,
            lazy.links->connected_peers());
    first_step_done.arrive_and_wait();
    // Later steps may not read an address: with the keys gone, one that did would time out.
    if (rank == 0)
      for (int r = 0; r < kSize; ++r) store->remove(tcp_address_key(kComm, r));
    addresses_gone.arrive_and_wait();
    for (std::uint64_t step = 2; step <= 20; ++step) ring_step(*lazy.mesh, kComm, step);
    require(lazy.links->connected_peers() == 2, "rank {} holds {} links after 20 ring steps", rank,
            lazy.links->connected_peers());
  });
}

TEST(ConnectOnFirstUse, EveryoneToEveryoneMakesEachPairOnce) {
  for (int size : {2, 3, 7}) {
    auto store = std::make_shared<MemoryStore>();
    testing::run_threads(size, [&](int rank) {
      LazyMesh lazy = lazy_mesh(store, rank, size, 70 + size);
      for (int round = 0; round < 3; ++round) exchange_with_everyone(*lazy.mesh, 70 + size);
      require(lazy.links->connected_peers() == size - 1, "rank {} of {} holds {} links", rank, size,
              lazy.links->connected_peers());
    });
  }
}

// The lower rank's message waits for the higher rank to dial, which it does once it posts the receive,
// however late.
TEST(ConnectOnFirstUse, TheLowerRankMaySendLongBeforeTheHigherRankAsks) {
  constexpr std::uint64_t kComm = 80;
  auto store = std::make_shared<MemoryStore>();
  testing::run_threads(2, [&](int rank) {
    LazyMesh lazy = lazy_mesh(store, rank, 2, kComm);
    std::vector<std::byte> message = testing::random_bytes(3 << 20, 7), got(message.size());
    auto envelope = testing::p2p_envelope(kComm, 1);
    if (rank == 0) {
      testing::wait_one(*lazy.mesh, lazy.mesh->post_send(1, envelope, message));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      testing::wait_one(*lazy.mesh, lazy.mesh->post_recv(0, envelope, got));
      require(got == message, "the message arrived changed");
    }
  });
}

TEST(ConnectOnFirstUse, AWrongTokenIsRefusedWithAClearError) {
  constexpr std::uint64_t kComm = 81;
  auto store = std::make_shared<MemoryStore>();
  log::set_level(log::Level::Error);  // the refusal is expected
  std::array<std::string, 2> errors;
  testing::run_threads(2, [&](int rank) {
    TcpOptions options = testing::loopback_options(kComm, rank == 1 ? "another-job" : "transport-test-token");
    LazyMesh lazy = lazy_mesh(store, rank, 2, kComm, options);
    std::array<int, 1> value{rank};
    auto envelope = testing::p2p_envelope(kComm, 1);
    try {
      if (rank == 1)
        lazy.mesh->post_send(0, envelope, std::as_bytes(std::span(value)));
      else
        lazy.mesh->post_recv(1, envelope, std::as_writable_bytes(std::span(value)));
      std::vector<OpId> done;
      if (!lazy.mesh->progress(Deadline::after(std::chrono::seconds(rank == 0 ? 2 : 20)), done))
        errors[rank] = "deadline";
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  log::set_level(log::Level::Warn);
  EXPECT_NE(errors[1].find("refused the connection"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("CANOPY_JOB_TOKEN"), std::string::npos) << errors[1];
  EXPECT_EQ(errors[0], "deadline");  // the refused rank never gets a link, so its message never comes
}

TEST(ConnectOnFirstUse, APeerThatIsGoneIsATimeoutNamingIt) {
  constexpr std::uint64_t kComm = 82;
  auto store = std::make_shared<MemoryStore>();
  log::set_level(log::Level::Error);
  {
    LazyMesh gone = lazy_mesh(store, 0, 2, kComm);  // publishes its address, then closes its listener
  }
  TcpOptions options = testing::loopback_options(kComm);
  options.connect_timeout = std::chrono::milliseconds(500);
  LazyMesh lazy = lazy_mesh(store, 1, 2, kComm, options);
  std::array<int, 1> value{1};
  const auto start = Clock::now();
  try {
    lazy.mesh->post_send(0, testing::p2p_envelope(kComm, 1), std::as_bytes(std::span(value)));
    std::vector<OpId> done;
    lazy.mesh->progress(Deadline::after(std::chrono::seconds(20)), done);
    ADD_FAILURE() << "a send to a rank that is gone completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("never connected with rank 0"), std::string::npos) << e.what();
  }
  log::set_level(log::Level::Warn);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace canopy::transport
