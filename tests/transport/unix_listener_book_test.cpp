// Shared-memory links that learn the host's listeners from the ranks' records (UnixListenerBook), as a
// communicator's meshes do: both ranks of a pair know from the records alone whether they share a network
// namespace, so a rank elsewhere is left to TCP at once, and a rank of this namespace whose socket is gone
// is an error, not a wait.
#include "transport/shm/unix_listener_book.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/shm_test_support.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/shm/shm_mesh.hpp"

namespace canopy::transport {
namespace {

using testing::loopback_options;

struct Books {
  std::shared_ptr<testing::MemoryStore> store = std::make_shared<testing::MemoryStore>();
  std::vector<std::shared_ptr<UnixListenerBook>> books;

  explicit Books(int size) {
    const UnixListenerBook::Records records{store, [](int rank) { return fmt::format("record/{}", rank); },
                                            [](const std::string& record, int) { return record; }};
    for (int rank = 0; rank < size; ++rank)
      books.push_back(std::make_shared<UnixListenerBook>(rank, size, /*meshes=*/1, records));
  }
  ShmOptions options(int rank, std::uint64_t comm_id) const {
    ShmOptions options = testing::shm_options_like(loopback_options(comm_id), static_cast<int>(books.size()));
    options.unix_listener_book = books[static_cast<std::size_t>(rank)];
    return options;
  }
  void publish(int rank, const std::string& part) { store->set(fmt::format("record/{}", rank), part); }
};

TEST(UnixListenerBook, ItsPartNamesTheNamespaceAndEveryMeshsListener) {
  ASSERT_FALSE(this_network_namespace().empty());
  Books books(2);
  const std::string part = books.books[0]->part();
  EXPECT_EQ(part, fmt::format("{} {}", this_network_namespace(), books.books[0]->name(0)));
  EXPECT_NE(books.books[0]->name(0), books.books[1]->name(0));  // fresh random names, never derived
  books.publish(1, "space/1 canopy-a canopy-b");                // two meshes' names where the book has one
  EXPECT_THROW(books.books[0]->read({1}, std::chrono::seconds(1)), Error);
}

// Rank 1 runs in another namespace by its record: ranks 0 and 2 meet, neither waits for rank 1.
TEST(UnixListenerBook, ARankInAnotherNamespaceIsLeftToTcpByBothSidesAtOnce) {
  Books books(3);
  for (int rank = 0; rank < 3; ++rank)
    books.publish(rank,
                  rank == 1 ? "another-kernel/1 " + books.books[1]->name(0) : books.books[rank]->part());
  log::set_level(log::Level::Error);
  const auto start = Clock::now();
  const ShmOptions options0 = books.options(0, 46), options2 = books.options(2, 46);
  std::vector<ShmPeers> peers(3);
  std::thread rank2([&] { peers[2] = connect_shm_peers(*books.store, 2, 3, options2); });
  peers[0] = connect_shm_peers(*books.store, 0, 3, options0);
  rank2.join();
  log::set_level(log::Level::Warn);
  EXPECT_EQ(peers[0].reached, std::vector<int>{2});
  EXPECT_EQ(peers[2].reached, std::vector<int>{0});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// On first use the records decide the same, and no pair meets while the mesh forms.
TEST(UnixListenerBook, OnFirstUseARankInAnotherNamespaceIsLeftToTcpAndNoPairMeetsNow) {
  Books books(3);
  for (int rank = 0; rank < 3; ++rank)
    books.publish(rank,
                  rank == 1 ? "another-kernel/1 " + books.books[1]->name(0) : books.books[rank]->part());
  log::set_level(log::Level::Error);
  std::vector<ShmPeers> peers(3);
  for (int rank : {0, 2}) {
    ShmOptions options = books.options(rank, 48);
    options.links_on_first_use = true;
    options.cell_bytes = 0;  // no host cells: no rank's link with rank 0 is made now either
    peers[static_cast<std::size_t>(rank)] = connect_shm_peers(*books.store, rank, 3, options);
  }
  log::set_level(log::Level::Warn);
  for (int rank : {0, 2}) {
    EXPECT_TRUE(peers[static_cast<std::size_t>(rank)].reached.empty());
    EXPECT_EQ(peers[static_cast<std::size_t>(rank)].sharing, std::vector<int>{2 - rank});
    EXPECT_NE(peers[static_cast<std::size_t>(rank)].dialer, nullptr);
  }
}

// Rank 0 shares this namespace by its record, but its socket is not there: rank 1 says so at once.
TEST(UnixListenerBook, ASocketOfThisNamespaceThatIsGoneIsAnErrorNotAWait) {
  Books books(2);
  books.publish(0, this_network_namespace() + " canopy-gone-00000000");
  books.publish(1, books.books[1]->part());
  const ShmOptions options = books.options(1, 47);
  testing::expect_peer_failed_at_once(0, [&] { connect_shm_peers(*books.store, 1, 2, options); });
}

}  // namespace
}  // namespace canopy::transport
