// The transport a sweep reports: what CANOPY_TRANSPORT asked for, auto resolved as connect_mesh does.
#include "bench/collectives/transport_in_use.hpp"

#include <gtest/gtest.h>

namespace canopy::bench {
namespace {

using transport::TransportKind;

TEST(TransportInUse, ForcedKindsAreWhatRuns) {
  for (bool verbs_everywhere : {false, true}) {
    EXPECT_EQ(resolve_transport(TransportKind::Tcp, verbs_everywhere).name, "tcp");
    EXPECT_EQ(resolve_transport(TransportKind::Verbs, verbs_everywhere).name, "verbs");
  }
  EXPECT_EQ(resolve_transport(TransportKind::Tcp, true).describe(), "tcp");
}

TEST(TransportInUse, AutoRunsVerbsOnlyWhenEveryRankCan) {
  EXPECT_EQ(resolve_transport(TransportKind::Auto, true).name, "verbs");
  EXPECT_EQ(resolve_transport(TransportKind::Auto, false).name, "tcp");
  EXPECT_EQ(resolve_transport(TransportKind::Auto, false).requested, "auto");
  EXPECT_EQ(resolve_transport(TransportKind::Auto, false).describe(), "tcp (auto)");
}

}  // namespace
}  // namespace canopy::bench
