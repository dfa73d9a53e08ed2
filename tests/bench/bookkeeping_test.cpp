// canopy-bench's bookkeeping (bookkeeping.hpp) takes O(lg P) dependent messages at any P, where the ring it
// used before took 2(P - 1); and the host count it prints comes from the communicator's layout.
#include "bench/collectives/bookkeeping.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy::bench {
namespace {

using collectives::CollectiveCall;

// The longest chain of messages each waiting for the one before, over every rank's schedule of `call`'s
// kind at `p` ranks (a few doubles each, as canopy-bench sends).
int rounds_of(Collective collective, std::string_view name, int p) {
  const collectives::Algorithm* algorithm = collectives::find_algorithm(collective, name);
  if (algorithm == nullptr) throw std::runtime_error(fmt::format("no algorithm {}", name));
  CollectiveCall call{collective, 0, p, collective == Collective::Barrier ? 0u : 7u, 0, 1 << 18};
  call.in_place = collective != Collective::Gather;  // canopy-bench gathers out of place, reduces in place
  std::vector<CollectiveCall> calls = collectives::every_rank(call);
  std::vector<collectives::RankBuffers> buffers;
  for (const CollectiveCall& c : calls) {
    collectives::RankBuffers b;
    b.data.resize(c.data_count() * sizeof(double));
    if (!c.in_place || !c.input_in_data()) b.input.resize(c.input_count() * sizeof(double));
    buffers.push_back(std::move(b));
  }
  const collectives::LinkModel latency_only{1e-5, 0, 0};
  return collectives::simulate(*algorithm, calls, DataType::Float64, ReduceOp::Max, std::move(buffers), latency_only)
      .rounds;
}

TEST(Bookkeeping, EveryCallTakesLogarithmicallyManyRounds) {
  for (int p : {2, 8, 100, 512}) {
    const int lg = static_cast<int>(std::ceil(std::log2(p)));
    for (const BookkeepingCall& call : kBookkeeping) {
      const int rounds = rounds_of(call.collective, call.algorithm, p);
      EXPECT_GE(rounds, 1) << call.algorithm << " at " << p;
      EXPECT_LE(rounds, 2 * lg) << call.algorithm << " at " << p << " ranks";
    }
  }
}

// The bound above is one a ring breaks: what canopy-bench's bookkeeping ran before.
TEST(Bookkeeping, TheRingItReplacesTakesLinearlyManyRounds) {
  EXPECT_GE(rounds_of(Collective::AllReduce, "ring", 512), 2 * 511);
}

// The host count canopy-bench prints is the layout's: ranks on three emulated hosts (CANOPY_HOST_ID), and no
// store request or message for it.
TEST(HostCount, ComesFromTheCommunicatorsLayout) {
  testing::TempDir dir;
  const std::vector<const char*> hosts{"host a", "host b", "host a", "host c"};
  CommunicatorOptions options = testing::group_options("bench-host-count");
  options.local_rank = options.local_size = -1;  // from the layout
  auto exits = testing::run_processes(4, [&](int rank) {
    testing::ScopedEnv env;
    env.set("CANOPY_HOST_ID", hosts[static_cast<std::size_t>(rank)]);
    Communicator comm(open_file_store(dir.path()), rank, 4, options);
    testing::require(comm.host_count() == 3, "rank {} counts {} hosts, not 3", rank, comm.host_count());
    comm.barrier();
  });
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(exits[rank].ok()) << rank << " " << exits[rank].describe();
}

TEST(HostCount, OneHostWhereNoneIsEmulated) {
  testing::TempDir dir;
  auto exits = testing::run_processes(2, [&](int rank) {
    Communicator comm(open_file_store(dir.path()), rank, 2, testing::group_options("bench-one-host"));
    testing::require(comm.host_count() == 1, "rank {} counts {} hosts, not 1", rank, comm.host_count());
  });
  for (int rank = 0; rank < 2; ++rank) EXPECT_TRUE(exits[rank].ok()) << rank << " " << exits[rank].describe();
}

}  // namespace
}  // namespace canopy::bench
