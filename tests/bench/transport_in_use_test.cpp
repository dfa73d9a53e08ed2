// The transport a sweep reports: what the communicator runs on, and what CANOPY_TRANSPORT asked for.
#include "bench/collectives/transport_in_use.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy::bench {
namespace {

TEST(TransportInUse, NamesTheRequestOnlyWhenItWasLeftToAuto) {
  EXPECT_EQ((TransportInUse{"tcp", "tcp"}.describe()), "tcp");
  EXPECT_EQ((TransportInUse{"verbs", "verbs"}.describe()), "verbs");
  EXPECT_EQ((TransportInUse{"tcp", "auto"}.describe()), "tcp (auto)");
}

TEST(TransportInUse, ReportsWhatTheGroupRunsOn) {
  for (const char* transport : {"tcp", "shm+tcp"}) {
    testing::ScopedEnv env;
    env.set("CANOPY_TRANSPORT", transport);  // the forked ranks inherit it
    testing::run_group(
        2,
        [transport](Communicator& comm) {
          TransportInUse in_use = transport_in_use(comm);
          testing::require(in_use.name == transport && in_use.requested == transport, "rank {} reports '{}'",
                           comm.rank(), in_use.describe());
        },
        testing::group_options("transport-in-use"));
  }
}

}  // namespace
}  // namespace canopy::bench
