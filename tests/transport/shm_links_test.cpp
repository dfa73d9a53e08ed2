// What only the shared-memory links do: rings of any size down to tiny ones, the memory budget and a ring
// that cannot be made (both fall back to TCP), the host layout deciding who shares memory, the handshake
// refusing strangers, in-place receives, and nothing left behind. The data path's common tests run over
// shared memory in data_path_test.cpp.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "canopy/error.hpp"
#include "common/log.hpp"
#include "tests/support/config_error.hpp"
#include "tests/support/mesh_processes.hpp"
#include "tests/support/ranks.hpp"
#include "tests/transport/memory_store.hpp"
#include "tests/transport/shm_test_support.hpp"
#include "tests/transport/transport_test_support.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/shm/unix_socket.hpp"
#include "transport/tcp/handshake.hpp"

namespace canopy::transport {
namespace {

using testing::exchange_with_everyone;
using testing::expect_all_ok;
using testing::LinkKind;
using testing::loopback_options;
using testing::p2p_envelope;
using testing::require;
using testing::wait_all;

TEST(ShmLinks, SizesAroundLinesSlotsAndTheRingsEndArriveBitExactly) {
  // A 4 KiB ring of 1 KiB slots (frames wrap at every turn), then the default 2 MiB ring of 256 KiB slots;
  // every payload through the ring, none by single copy (shm_single_copy_test.cpp), those of up to a
  // cell's body in their cells.
  const std::vector<std::size_t> tiny = {0,
                                         1,
                                         7,
                                         63,
                                         64,
                                         65,
                                         127,
                                         128,
                                         kInlineBytes - 1,
                                         kInlineBytes,
                                         kInlineBytes + 1,
                                         1023,
                                         1024,
                                         1025,
                                         2047,
                                         2048,
                                         4031,
                                         4032,
                                         4033,
                                         4095,
                                         4096,
                                         4097,
                                         8192,
                                         12293,
                                         65537,
                                         (std::size_t{1} << 20) + 3};
  expect_all_ok(
      run_shm_processes(2, 31, rings(4096, 1024), [&](Transport& t) { exchange_sizes(t, 31, tiny); }));
  constexpr std::size_t K = 1024;
  const std::vector<std::size_t> large = {256 * K - 1,   256 * K,  256 * K + 1,  2048 * K - 64,
                                          2048 * K - 65, 2048 * K, 2048 * K + 1, 5,
                                          4096 * K + 3,  0};
  expect_all_ok(run_shm_processes(2, 32, rings(2048 * K, 256 * K),
                                  [&](Transport& t) { exchange_sizes(t, 32, large); }));
}

// Every pair at once, both ways, through 1 KiB rings: a receive that is posted late, or a send that holds
// its ring while waiting for another, would deadlock here.
TEST(ShmLinks, TinyRingsCarryEveryPairsTrafficAtOnceInOrder) {
  constexpr std::uint64_t kComm = 33;
  expect_all_ok(run_shm_processes(4, kComm, rings(1024, 256), [&](Transport& t) {
    std::vector<std::vector<std::byte>> out, in;
    std::vector<OpId> ids;
    for (int round = 0; round < 20; ++round)
      for (int peer = 0; peer < t.size(); ++peer) {
        if (peer == t.rank()) continue;
        const std::size_t bytes = round % 3 == 0 ? 40000 + round : 8 * round;
        auto envelope = p2p_envelope(kComm, 1, static_cast<std::uint32_t>(round), bytes);
        out.push_back(testing::random_bytes(bytes, 1000 * round + 10 * t.rank() + peer));
        in.emplace_back(bytes);
        ids.push_back(t.post_send(peer, envelope, out.back()));
        ids.push_back(t.post_recv(peer, envelope, in.back()));
      }
    wait_all(t, ids);
    std::size_t i = 0;
    for (int round = 0; round < 20; ++round)
      for (int peer = 0; peer < t.size(); ++peer) {
        if (peer == t.rank()) continue;
        require(testing::first_difference(in[i++], 1000 * round + 10 * peer + t.rank()) == -1,
                "rank {}: round {} from rank {} corrupted", t.rank(), round, peer);
      }
  }));
}

TEST(ShmLinks, InPlaceReceivesHandOverWholeElementsInOrder) {
  constexpr std::uint64_t kComm = 34;
  constexpr std::size_t kBytes = (std::size_t{1} << 20) + 12;
  expect_all_ok(run_shm_processes(2, kComm, rings(4096, 1024), [&](Transport& t) {
    auto envelope = p2p_envelope(kComm, 1, 0, kBytes / 4);
    std::vector<std::byte> first(8);
    if (t.rank() == 0) {
      auto payload = testing::random_bytes(kBytes, 7);
      wait_all(t, {t.post_send(1, envelope, first)});  // the ring exists once the first message went
      wait_all(t, {t.post_send(1, envelope, payload)});
      wait_all(t, {t.post_send(1, envelope, first)});  // this one the receiver refuses
      return;
    }
    require(!t.receives_in_place(0), "in place before any ring exists");
    wait_all(t, {t.post_recv(0, envelope, first)});
    const RecordingSink sink = receive_in_place_exactly(t, 0, envelope, kBytes, 7);
    require(sink.pieces >= static_cast<int>(kBytes / 1024), "{} pieces through 1 KiB slots", sink.pieces);
    RecordingSink untouched;
    auto other = envelope;
    other.seq = 2;
    t.post_recv_in_place(0, other, kBytes, untouched);
    try {
      wait_all(t, {0});
      require(false, "a mismatched in-place receive completed");
    } catch (const Error& e) {
      require(e.code() == ErrorCode::Mismatch, "{}", e.what());
    }
    require(untouched.pieces == 0, "the sink of a mismatched message saw {} pieces", untouched.pieces);
  }));
}

// After the first message to every peer: whether each peer's messages came through shared memory.
std::string rings_from_everyone(Transport& t, std::uint64_t comm_id) {
  exchange_with_everyone(t, comm_id);
  std::string rings;
  for (int peer = 0; peer < t.size(); ++peer)
    rings += peer == t.rank() ? '-' : t.receives_in_place(peer) ? 's' : 't';
  return rings;
}

TEST(ShmLinks, AHostBudgetTooSmallForAnyRingLeavesThePairsOnTcp) {
  expect_all_ok(run_shm_processes(3, 35, rings(1 << 20, 1 << 16, 1000), [&](Transport& t) {
    log::set_level(log::Level::Error);
    const std::string seen = rings_from_everyone(t, 35);
    require(seen.find('s') == std::string::npos, "rank {}: rings {} within a 1000-byte budget", t.rank(),
            seen);
    require(ShmBudget::rings.held() == 0, "rank {} holds {} bytes of rings", t.rank(),
            ShmBudget::rings.held());
    for (int i = 0; i < 5; ++i) exchange_with_everyone(t, 35);
  }));
}

TEST(ShmLinks, TheBudgetGivesRingsToTheFirstPairsThatTalkAndTcpToTheRest) {
  // Room for 1.5 rings of 64 KiB per rank: each rank's first peer gets one, its others TCP.
  constexpr std::uint64_t kRing = 64 * 1024;
  const std::uint64_t budget = 4 * (ring_segment_bytes(kRing)) * 3 / 2;
  expect_all_ok(run_shm_processes(4, 36, rings(kRing, 4096, budget), [&](Transport& t) {
    log::set_level(log::Level::Error);
    rings_from_everyone(t, 36);
    require(ShmBudget::rings.held() == ring_segment_bytes(kRing), "rank {} holds {} bytes of rings", t.rank(),
            ShmBudget::rings.held());
    for (int round = 0; round < 3; ++round) exchange_with_everyone(t, 36);
  }));
}

// A budget of 256 KiB rings for every direction: each rank's rings shrink to that share from the first one
// on, so every pair gets a ring (first come, first served would give the first pairs 2 MiB and the rest TCP).
TEST(ShmLinks, EveryDirectionGetsAnEqualShareOfTheBudget) {
  constexpr std::uint64_t kShare = 256 * 1024;
  const std::uint64_t budget = 4 * 3 * ring_segment_bytes(kShare);
  expect_all_ok(run_shm_processes(4, 44, rings(2 << 20, 64 << 10, budget), [&](Transport& t) {
    const std::string seen = rings_from_everyone(t, 44);
    require(seen.find('t') == std::string::npos, "rank {}: rings {}", t.rank(), seen);
    require(ShmBudget::rings.held() == 3 * ring_segment_bytes(kShare), "rank {} holds {} bytes of rings",
            t.rank(), ShmBudget::rings.held());
    exchange_with_everyone(t, 44);
  }));
}

TEST(ShmLinks, ARingThatCannotBeAllocatedIsAMessageAndTcpNotASignal) {
  // Rank 0 may not make files beyond 64 KiB: its 1 MiB ring fails at fallocate (EFBIG), before any page.
  auto limit_rank_zero = [](int rank) {
    if (rank != 0) return;
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit small{64 * 1024, 64 * 1024};
    require(::setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
  };
  expect_all_ok(run_shm_processes(
      2, 37, rings(1 << 20, 1 << 16),
      [&](Transport& t) {
        const std::string seen = rings_from_everyone(t, 37);
        const std::string expected = t.rank() == 0 ? "-s" : "t-";  // 1 -> 0 in memory, 0 -> 1 over TCP
        require(seen == expected, "rank {}: rings {}, expected {}", t.rank(), seen, expected);
        exchange_sizes(t, 37, {0, 5, 70000, 3 << 20});
      },
      {}, limit_rank_zero));
}

TEST(ShmLinks, OnlyRanksOfOneHostByTheLayoutShareMemory) {
  expect_all_ok(run_shm_processes(
      4, 38, ShmOptions{},
      [&](Transport& t) {
        require(t.name() == "shm+tcp", "rank {}: {}", t.rank(), t.name());
        const std::string seen = rings_from_everyone(t, 38);
        const std::string expected =
            t.rank() < 2 ? (t.rank() == 0 ? "-stt" : "s-tt") : (t.rank() == 2 ? "tt-s" : "tts-");
        require(seen == expected, "rank {}: rings {}, expected {}", t.rank(), seen, expected);
      },
      {0, 0, 1, 1}));
  expect_all_ok(run_shm_processes(
      3, 39, ShmOptions{},
      [&](Transport& t) { require(t.name() == "tcp", "rank {}: {}", t.rank(), t.name()); }, {0, 1, 2}));
}

// A stranger at rank 0's socket while the mesh forms: without the token, or with it but as a rank that does
// not belong, it is refused; the real rank 1 is taken.
TEST(ShmLinks, TheHandshakeRefusesStrangersAndTheMeshStillForms) {
  testing::MemoryStore store;
  auto options = testing::shm_options_like(loopback_options(40), 2);
  options.handshake_timeout = std::chrono::seconds(5);
  log::set_level(log::Level::Error);
  std::atomic<bool> strangers_in{false};
  std::vector<AckStatus> answers;
  std::thread stranger([&] {
    const std::string name = store.get("shm/40/socket/0", std::chrono::seconds(20));
    std::vector<UniqueFd> sockets;
    UniqueFd doorbell(::eventfd(0, EFD_CLOEXEC));
    for (auto [token, claimed] :
         {std::pair<std::string, std::uint32_t>{"a guess", 1}, {options.job_token, 5}}) {
      int error = 0;
      sockets.push_back(connect_unix(name, error));
      require(sockets.back().valid(), "connect: {}", std::strerror(error));
      Hello hello{.comm_id = 40, .rank = claimed, .size = 2};
      require(send_packet(sockets.back().get(), encode_hello(hello, token), doorbell.get()) == 0, "hello");
    }
    strangers_in = true;
    for (auto& socket : sockets) {
      std::array<std::byte, kAckSize> answer{};
      UniqueFd passed;
      long n = -EAGAIN;
      for (int i = 0; i < 2000 && n == -EAGAIN; ++i) {
        n = receive_packet(socket.get(), answer, passed);
        if (n == -EAGAIN) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      require(n == static_cast<long>(kAckSize), "no answer ({})", n);
      require(!passed.valid(), "a refused stranger was given the doorbell");
      answers.push_back(decode_ack(answer).status);
    }
  });
  std::vector<ShmPeers> peers(2);
  std::thread rank0([&] { peers[0] = connect_shm_peers(store, 0, 2, options); });
  while (!strangers_in) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  peers[1] = connect_shm_peers(store, 1, 2, options);
  rank0.join();
  stranger.join();
  EXPECT_EQ(peers[0].reached, std::vector<int>{1});
  EXPECT_EQ(peers[1].reached, std::vector<int>{0});
  EXPECT_EQ(answers, (std::vector<AckStatus>{AckStatus::WrongToken, AckStatus::BadRank}));
  log::set_level(log::Level::Warn);
}

// CANOPY_SHM_*: the defaults, values taken, and values a ring cannot have refused with the setting's name.
TEST(ShmLinks, SettingsAreCheckedWhereTheyAreRead) {
  auto options_of = [](const EnvMap& env) {
    return ShmOptions::from(MeshOptions::from_settings(Settings::parse(env), 1));
  };
  const ShmOptions defaults = options_of({});
  EXPECT_EQ(defaults.ring_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(defaults.slot_bytes, std::uint64_t{256} << 10);
  EXPECT_EQ(defaults.host_budget_bytes, std::uint64_t{32} << 20);
  EXPECT_EQ(defaults.single_copy_bytes, std::uint64_t{64} << 10);
  EXPECT_FALSE(defaults.spin.has_value());  // the spin rule decides
  const ShmOptions taken = options_of({{"CANOPY_SHM_RING_BYTES", "64K"},
                                       {"CANOPY_SHM_SLOT_BYTES", "4K"},
                                       {"CANOPY_SHM_BYTES", "1M"},
                                       {"CANOPY_SHM_SINGLE_COPY_BYTES", "0"},
                                       {"CANOPY_SHM_SPIN_US", "0"}});
  EXPECT_EQ(taken.ring_bytes, 64u << 10);
  EXPECT_EQ(taken.slot_bytes, 4u << 10);
  EXPECT_EQ(taken.host_budget_bytes, 1u << 20);
  EXPECT_EQ(taken.single_copy_bytes, 0u);
  EXPECT_EQ(taken.spin, std::chrono::microseconds(0));
  MeshOptions driven_by_a_thread =
      MeshOptions::from_settings(Settings::parse({{"CANOPY_SHM_SPIN_US", "75"}}), 1);
  driven_by_a_thread.spin = false;
  EXPECT_EQ(ShmOptions::from(driven_by_a_thread).spin, std::chrono::microseconds(0));
  EXPECT_MENTIONS(testing::config_error_of([&] {
                    options_of({{"CANOPY_SHM_RING_BYTES", "3000"}});
                  }),
                  "CANOPY_SHM_RING_BYTES=3000 must be a power of two");
  EXPECT_MENTIONS(testing::config_error_of([&] {
                    options_of({{"CANOPY_SHM_SLOT_BYTES", "100"}});
                  }),
                  "CANOPY_SHM_SLOT_BYTES=100 must be a multiple of 64");
  EXPECT_MENTIONS(testing::config_error_of([&] {
                    options_of({{"CANOPY_SHM_RING_BYTES", "512"}});
                  }),
                  "CANOPY_SHM_RING_BYTES");
}

// A rank that introduces itself and leaves before the answer (it crashed during set-up) is no reason to
// wait out the deadline: its pair goes to TCP at once.
TEST(ShmLinks, ARankThatLeavesDuringTheHandshakeIsNotWaitedFor) {
  testing::MemoryStore store;
  auto options = testing::shm_options_like(loopback_options(43), 2);
  options.connect_timeout = std::chrono::seconds(20);
  log::set_level(log::Level::Error);
  std::thread rank1([&] {               // says hello as rank 1, says it reached rank 0, and is gone
    store.set("shm/43/socket/1", "-");  // the highest rank listens for nobody
    // Every socket name of the host, by rank, as rank 0 gathered them.
    const std::string names = store.get("shm/43/socket/host/0", std::chrono::seconds(20));
    int error = 0;
    UniqueFd socket = connect_unix(names.substr(0, names.find('\n')), error);
    require(socket.valid(), "connect: {}", std::strerror(error));
    UniqueFd doorbell(::eventfd(0, EFD_CLOEXEC));
    Hello hello{.comm_id = 43, .rank = 1, .size = 2};
    require(send_packet(socket.get(), encode_hello(hello, options.job_token), doorbell.get()) == 0, "hello");
    socket = UniqueFd();
    store.set("shm/43/unreached/1", "");  // it missed none of the lower ranks
  });
  const auto start = Clock::now();
  const ShmPeers peers = connect_shm_peers(store, 0, 2, options);
  rank1.join();
  EXPECT_TRUE(peers.reached.empty());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  log::set_level(log::Level::Warn);
}

// A rank of this host by the layout whose socket cannot be reached (it runs in a network namespace of its
// own): its pairs use TCP, the other pairs shared memory, and nobody waits for a connection that cannot come.
TEST(ShmLinks, APairThatCannotReachEachOtherIsLeftToTcpAndNobodyWaitsForIt) {
  testing::MemoryStore store;
  auto options = testing::shm_options_like(loopback_options(44), 3);
  log::set_level(log::Level::Error);
  std::thread rank1([&] {  // reaches no one, and no one reaches it
    store.set("shm/44/socket/1", "canopy-in-another-namespace");
    store.get("shm/44/socket/host/0", std::chrono::seconds(20));
    store.set("shm/44/unreached/1", "0");
  });
  std::vector<ShmPeers> peers(3);
  const auto start = Clock::now();
  std::thread rank2([&] { peers[2] = connect_shm_peers(store, 2, 3, options); });
  peers[0] = connect_shm_peers(store, 0, 3, options);
  rank2.join();
  rank1.join();
  EXPECT_EQ(peers[0].reached, std::vector<int>{2});
  EXPECT_EQ(peers[2].reached, std::vector<int>{0});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  log::set_level(log::Level::Warn);
}

// A rank of the host that never comes: at the deadline, the rank that gathers the host's sockets and one
// that waits for its answer both name it.
TEST(ShmLinks, ARankOfTheHostThatNeverComesIsNamedAtTheDeadline) {
  testing::MemoryStore store;
  auto options = testing::shm_options_like(loopback_options(45), 3);
  options.connect_timeout = std::chrono::seconds(1);
  std::vector<std::string> errors(2);
  testing::run_threads(2, [&](int rank) {
    try {
      connect_shm_peers(store, rank, 3, options);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Timeout) errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  for (const std::string& error : errors) EXPECT_MENTIONS(error, "shm/45/socket/2");
}

// The files of /dev/shm and the descriptors and mappings of this process.
struct Traces {
  int dev_shm_files = 0;
  int descriptors = 0;
  int ring_mappings = 0;
  int cell_mappings = 0;  // the host's cells (host_cells.hpp)
};

Traces traces() {
  Traces t;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) t.dev_shm_files += entry->d_name[0] != '.';
    ::closedir(dir);
  }
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) t.descriptors += entry->d_name[0] != '.';
    ::closedir(dir);
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    t.ring_mappings += line.find("canopy-ring") != std::string::npos;
    t.cell_mappings += line.find("canopy-cells") != std::string::npos;
  }
  return t;
}

TEST(ShmLinks, NothingIsLeftInDevShmOrTheProcessAfterAMeshOrAKilledPeer) {
  const Traces before = traces();
  {
    testing::MemoryStore store;
    std::vector<std::unique_ptr<Transport>> meshes(2);
    testing::run_threads(2, [&](int rank) {
      meshes[rank] = testing::connect_loopback_mesh(LinkKind::Shm, store, rank, 2, loopback_options(41));
      exchange_with_everyone(*meshes[rank], 41);
    });
    require(traces().ring_mappings == 4, "{} ring mappings for two directions seen from both ends",
            traces().ring_mappings);
    require(traces().cell_mappings == 2, "{} mappings of the host's cells by two ranks",
            traces().cell_mappings);
  }
  const Traces after = traces();
  EXPECT_EQ(after.ring_mappings, 0);
  EXPECT_EQ(after.cell_mappings, 0);
  EXPECT_EQ(after.descriptors, before.descriptors);
  EXPECT_EQ(after.dev_shm_files, before.dev_shm_files);
  // A rank killed with its rings mapped: the memory goes with the processes, no name was ever made.
  auto exits = run_shm_processes(2, 42, ShmOptions{}, [&](Transport& t) {
    log::set_level(log::Level::Error);
    exchange_with_everyone(t, 42);
    if (t.rank() == 1) ::raise(SIGKILL);
    std::vector<std::byte> never(8);
    try {
      wait_all(t, {t.post_recv(1, p2p_envelope(42, 2, 0, 8), never)});
    } catch (const PeerFailedError& e) {
      require(e.peer() == 1, "{}", e.what());
    }
  });
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_EQ(exits[1].signal, SIGKILL) << exits[1].describe();
  EXPECT_EQ(traces().dev_shm_files, before.dev_shm_files);
}

}  // namespace
}  // namespace canopy::transport
