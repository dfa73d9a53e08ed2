// Which link carries each peer: the pure rules every rank of a pair applies alike (link_kinds.hpp,
// choose_links in select_transport.hpp), and how a rank says them at INFO.
#include "transport/link_kinds.hpp"

#include <gtest/gtest.h>

#include "common/env.hpp"
#include "common/settings.hpp"
#include "transport/select_transport.hpp"

namespace canopy::transport {
namespace {

using enum LinkKind;

const std::vector<int> kTwoHostsOfTwo = {0, 0, 1, 1};

TEST(LinkKinds, SharedMemoryWithinAHostAndTheNetworkBetweenHosts) {
  const LinkChoice shm_verbs{.shared_memory = true, .network = Verbs};
  EXPECT_EQ(plan_links(0, 4, kTwoHostsOfTwo, shm_verbs), (std::vector{Self, SharedMemory, Verbs, Verbs}));
  EXPECT_EQ(plan_links(3, 4, kTwoHostsOfTwo, shm_verbs), (std::vector{Verbs, Verbs, SharedMemory, Self}));
  const LinkChoice shm_tcp{.shared_memory = true, .network = Tcp};
  EXPECT_EQ(plan_links(2, 4, kTwoHostsOfTwo, shm_tcp), (std::vector{Tcp, Tcp, Self, SharedMemory}));
}

TEST(LinkKinds, OneKindForEveryPeerWithoutSharedMemoryOrALayout) {
  EXPECT_EQ(plan_links(1, 4, kTwoHostsOfTwo, LinkChoice{.network = Verbs}),
            (std::vector{Verbs, Self, Verbs, Verbs}));
  // No layout: every rank on a host of its own.
  EXPECT_EQ(plan_links(0, 3, {}, LinkChoice{.shared_memory = true, .network = Tcp}),
            (std::vector{Self, Tcp, Tcp}));
  EXPECT_EQ(plan_links(0, 1, {0}, LinkChoice{.shared_memory = true, .network = Verbs}), (std::vector{Self}));
}

TEST(LinkKinds, EveryRankOfAPairAgrees) {
  const std::vector<int> hosts = {0, 1, 0, 2, 1, 0};
  for (const LinkChoice choice : {LinkChoice{true, Verbs}, LinkChoice{true, Tcp}, LinkChoice{false, Verbs}}) {
    for (int a = 0; a < 6; ++a) {
      for (int b = 0; b < 6; ++b) {
        if (a == b) continue;
        EXPECT_EQ(plan_links(a, 6, hosts, choice)[b], plan_links(b, 6, hosts, choice)[a]);
      }
    }
  }
}

TEST(LinkKinds, ChoiceFromTheSettingAndTheVerdict) {
  const TransportSettings settings =
      TransportSettings::from(Settings::parse(EnvMap{{"CANOPY_SHM_MAX_RANKS", "4"}}));
  auto choice = [&](TransportKind kind, bool verbs, int host_ranks) {
    const LinkChoice c = choose_links(kind, verbs, host_ranks, settings);
    return std::pair{c.shared_memory, c.network};
  };
  // auto on an RDMA cluster: shared memory + verbs; without verbs everywhere: shared memory + TCP.
  EXPECT_EQ(choice(TransportKind::Auto, true, 2), std::pair(true, Verbs));
  EXPECT_EQ(choice(TransportKind::Auto, false, 2), std::pair(true, Tcp));
  // A host more crowded than CANOPY_SHM_MAX_RANKS: no shared memory, whatever joins the hosts.
  EXPECT_EQ(choice(TransportKind::Auto, true, 5), std::pair(false, Verbs));
  EXPECT_EQ(choice(TransportKind::Auto, false, 5), std::pair(false, Tcp));
  // The explicit words keep their meaning: verbs for every peer, the same host's included.
  EXPECT_EQ(choice(TransportKind::Verbs, true, 2), std::pair(false, Verbs));
  EXPECT_EQ(choice(TransportKind::Verbs, false, 2), std::pair(false, Verbs));
  EXPECT_EQ(choice(TransportKind::ShmTcp, true, 9), std::pair(true, Tcp));
  EXPECT_EQ(choice(TransportKind::Tcp, true, 2), std::pair(false, Tcp));
}

TEST(LinkKinds, MeshNames) {
  EXPECT_EQ(mesh_name({Self, SharedMemory, Verbs, Verbs}, true), "shm+verbs");
  EXPECT_EQ(mesh_name({Self, Verbs, Verbs}, false), "verbs");
  EXPECT_EQ(mesh_name({Self, SharedMemory, Tcp}, true), "shm+tcp");
  // Every peer on this host: the TCP links are the rings' fallback, as shm+tcp has always been named.
  EXPECT_EQ(mesh_name({SharedMemory, Self}, true), "shm+tcp");
  EXPECT_EQ(mesh_name({Self, Tcp}, true), "tcp");
  EXPECT_EQ(mesh_name({Self}, true), "tcp");
}

TEST(LinkKinds, DescribedCompactly) {
  EXPECT_EQ(rank_runs({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
  EXPECT_EQ(rank_runs({}), "");
  EXPECT_EQ(describe_links({Self, SharedMemory, Verbs, Verbs}),
            "shared memory with rank 1 of this host, verbs with ranks 2-3");
  EXPECT_EQ(describe_links({Verbs, Verbs, Self, SharedMemory, Tcp, Verbs}),
            "shared memory with rank 3 of this host, verbs with ranks 0-1,5, TCP with rank 4");
  EXPECT_EQ(describe_links({Self}), "no peers");
}

}  // namespace
}  // namespace canopy::transport
