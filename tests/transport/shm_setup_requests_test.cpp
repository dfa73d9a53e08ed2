// The store requests a rank makes to form a shm+tcp mesh on one host (CANOPY_TRANSPORT=auto falling back
// from verbs, the shared-memory links, the host's cells; TCP on first use), counted by the TcpStore client
// itself: a bound whatever the group's size. Issue 27: set-up steps that read every rank's key made O(P)
// requests per rank, some 260k round trips through one store server for 512 ranks of one host.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>

#include "tests/support/mesh_processes.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/select_transport.hpp"

namespace canopy::transport {
namespace {

using testing::expect_all_ok;
using testing::require;

// A rank's requests: the verbs verdict (agreed here by the mesh itself: a communicator carries it in its
// layout records), the sockets and whom each rank reached (two each, three for the rank that gathers them),
// and the TCP address. The host's cells agree over the ranks' sockets, with no request.
constexpr std::uint64_t kMostSetUpRequests = 3 * 3 + 1;

TEST(ShmSetUp, StoreRequestsPerRankDoNotGrowWithTheGroup) {
  for (int size : {8, 64}) {
    const auto comm_id = static_cast<std::uint64_t>(90 + size);
    auto connect = [&](Store& store, int rank, int n) {
      // No RDMA device that auto could choose, wherever the test runs.
      MeshOptions options =
          testing::loopback_mesh_options(comm_id, "transport-test-token", {{"CANOPY_IB_HCA", "=no_such_hca"}});
      options.host_of_rank.assign(static_cast<std::size_t>(n), 0);
      options.local_size = n;
      options.store_for_first_use = std::shared_ptr<Store>(std::shared_ptr<Store>(), &store);
      const std::uint64_t before = store.requests_sent();
      auto t = connect_mesh(store, rank, n, options, TransportKind::Auto);
      const std::uint64_t sent = store.requests_sent() - before;
      if (rank == 0 || rank == n - 1)
        fmt::print("{} ranks: rank {} made {} store requests to form its mesh\n", n, rank, sent);
      require(t->name() == "shm+tcp", "rank {}: {}", rank, t->name());
      require(t->host_cells() != nullptr, "rank {}: no host cells", rank);
      require(sent <= kMostSetUpRequests, "rank {} of {}: {} store requests to form the mesh, more than {}",
              rank, n, sent, kMostSetUpRequests);
      return t;
    };
    expect_all_ok(testing::run_mesh_processes(size, connect, [](Transport&) {}));
  }
}

}  // namespace
}  // namespace canopy::transport
