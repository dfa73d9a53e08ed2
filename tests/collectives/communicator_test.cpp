// Every algorithm of every collective between real processes over shared memory and TCP, checked exactly; all
// ranks bit-identical for random floats; async work (communicator_failure_test.cpp: what fails, and how).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "common/cpu_list.hpp"
#include "tests/support/group.hpp"
#include "oracle/exact_values.hpp"
#include "oracle/rank_result.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"
#include "transport/spin_rule.hpp"

namespace canopy {
namespace {

using testing::require;

CommunicatorOptions test_options() { return testing::group_options("communicator-test"); }

void run_group(int ranks, const std::function<void(Communicator&)>& body) {
  testing::run_group(ranks, body, test_options());
}

// Out of place (the default) the input must come back unchanged; in place (all-reduce, broadcast,
// reduce, all-gather) the input is the output buffer itself (an all-gather's, this rank's block of it).
std::uint64_t wrong_after(Communicator& comm, Collective collective, const std::string& algorithm, std::uint64_t count,
                          int root, ReduceOp op, bool in_place = false) {
  const DataType type = DataType::Float32;
  const int p = comm.size();
  const int r = comm.rank();
  std::uint64_t in_count = collective == Collective::ReduceScatter ? count * p : count;
  std::uint64_t out_count = collective == Collective::AllGather ? count * p : count;
  std::vector<float> input(in_count + 1), output(out_count + 1, -99.0f);
  float* in = input.data();
  if (in_place) in = collective == Collective::AllGather ? output.data() + r * count : output.data();
  oracle::fill_inputs(type, op, r, 0, in, in_count);
  const std::vector<float> input_before = input;
  CollectiveArgs args{collective, in, output.data(), count, type, op, root};
  comm.run(args, {.algorithm = algorithm});
  if (!in_place && input != input_before) return 1 + in_count;  // the input was written to
  // Out of place, a broadcast's root keeps its value in its input.
  const bool root_of_broadcast = collective == Collective::Broadcast && r == root && !in_place;
  return oracle::count_wrong({collective, type, op, r, p, root, count}, root_of_broadcast ? in : output.data());
}

// Every algorithm of the collectives that reduce or spread one buffer, many counts, in and out of place.
void check_every_algorithm(Communicator& comm) {
  const int p = comm.size();
  const Collective kinds[] = {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                              Collective::AllGather, Collective::ReduceScatter};
  const std::uint64_t counts[] = {0, 1, static_cast<std::uint64_t>(p) + 1, 1000, 65537};
  for (Collective kind : kinds) {
    for (const auto& algorithm : collectives::algorithms(kind)) {
      for (std::uint64_t count : counts) {
        int root =
            kind == Collective::Broadcast || kind == Collective::Reduce ? static_cast<int>(count % p) : 0;
        for (bool in_place : {false, true}) {
          if (in_place && kind == Collective::ReduceScatter)
            continue;  // its output is smaller than its input
          std::uint64_t wrong =
              wrong_after(comm, kind, std::string(algorithm.name), count, root, ReduceOp::Sum, in_place);
          require(wrong == 0, "{} {} count {} root {} on {} ranks{}: {} wrong elements on rank {}",
                  to_string(kind), algorithm.name, count, root, p, in_place ? " in place" : "", wrong,
                  comm.rank());
        }
      }
    }
  }
  comm.barrier();
}

// Random floats sum differently in different orders; every algorithm still leaves rank 0's bits everywhere.
void check_bit_identical_all_reduces(Communicator& comm) {
  for (const auto& algorithm : collectives::algorithms(Collective::AllReduce)) {
    std::mt19937 random(1234 + comm.rank());
    std::uniform_real_distribution<float> value(-1e3f, 1e3f);
    std::vector<float> data(30011);
    for (float& x : data) x = value(random);
    comm.all_reduce(std::span(data), ReduceOp::Sum,
                    {.algorithm = std::string(algorithm.name), .chunk_bytes = 4096});
    // Compare every rank's bytes with rank 0's.
    std::vector<float> from_root = data;
    comm.broadcast(std::span(from_root), 0);
    require(std::memcmp(from_root.data(), data.data(), data.size() * sizeof(float)) == 0,
            "{}: rank {} differs from rank 0", algorithm.name, comm.rank());
  }
}

// The links every algorithm is checked over: shared memory between the ranks of one host (the default),
// TCP alone, shared memory through 4 KiB rings of 1 KiB slots with every payload in them (a schedule that
// needed a message to fit in a buffer before the receiver posts its receive would deadlock there), and the
// same tiny rings with every message beyond 256 bytes outside reductions by single copy (a send then waits
// for its receiver).
struct Links {
  std::string name;
  std::string transport;
  std::vector<std::pair<std::string, std::string>> environment;
};
const Links kLinks[] = {
    {"Shm", "shm+tcp", {{"CANOPY_TRANSPORT", "shm+tcp"}}},
    {"Tcp", "tcp", {{"CANOPY_TRANSPORT", "tcp"}}},
    {"TinyRings",
     "shm+tcp",
     {{"CANOPY_TRANSPORT", "shm+tcp"},
      {"CANOPY_SHM_RING_BYTES", "4096"},
      {"CANOPY_SHM_SLOT_BYTES", "1024"},
      {"CANOPY_SHM_SINGLE_COPY_BYTES", "0"}}},
    {"SingleCopy",
     "shm+tcp",
     {{"CANOPY_TRANSPORT", "shm+tcp"},
      {"CANOPY_SHM_RING_BYTES", "4096"},
      {"CANOPY_SHM_SLOT_BYTES", "1024"},
      {"CANOPY_SHM_SINGLE_COPY_BYTES", "256"}}}};

class EveryAlgorithm : public ::testing::TestWithParam<std::tuple<int, Links>> {};

TEST_P(EveryAlgorithm, IsExactBetweenProcesses) {
  const auto& [p, links] = GetParam();
  testing::ScopedEnv environment;
  for (const auto& [name, value] : links.environment) environment.set(name, value);
  run_group(p, [p, &links](Communicator& comm) {
    const std::string expected = p == 1 ? "tcp" : links.transport;
    require(comm.transport_name() == expected, "rank {}: over {}, not {}", comm.rank(), comm.transport_name(),
            expected);
    check_every_algorithm(comm);
  });
}

std::string ranks_and_links(const ::testing::TestParamInfo<std::tuple<int, Links>>& param) {
  return fmt::format("{}_{}", std::get<1>(param.param).name, std::get<0>(param.param));
}

INSTANTIATE_TEST_SUITE_P(Ranks, EveryAlgorithm,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::ValuesIn(kLinks)),
                         ranks_and_links);

// Two emulated hosts (CANOPY_HOST_ID) of three ranks each: shared memory within each, TCP between them.
TEST(Communicator, EveryAlgorithmIsExactOnTwoHostsOfThreeRanks) {
  testing::TempDir dir;
  testing::ScopedEnv environment;
  environment.set("CANOPY_TRANSPORT", "shm+tcp");
  auto exits = testing::run_processes(6, [&](int rank) {
    ::setenv("CANOPY_HOST_ID", rank < 3 ? "host a" : "host b", 1);
    Communicator comm(open_file_store(dir.path()), rank, 6, test_options());
    require(comm.transport_name() == "shm+tcp", "rank {}: over {}", rank, comm.transport_name());
    check_every_algorithm(comm);
  });
  for (int rank = 0; rank < 6; ++rank) EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

// Under auto, a host with more of the group's ranks than CANOPY_SHM_MAX_RANKS talks over TCP, both
// meshes, while a smaller host beside it keeps shared memory; the two kinds of rank work together.
TEST(Communicator, AutoSharesMemoryOnlyOnHostsWithinTheRankBound) {
  testing::TempDir dir;
  testing::ScopedEnv environment;
  environment.set("CANOPY_TRANSPORT", "auto");
  environment.set("CANOPY_SHM_MAX_RANKS", "2");
  auto exits = testing::run_processes(5, [&](int rank) {
    ::setenv("CANOPY_HOST_ID", rank < 3 ? "host a" : "host b", 1);
    Communicator comm(open_file_store(dir.path()), rank, 5, test_options());
    const std::string_view expected = rank < 3 ? "tcp" : "shm+tcp";
    require(comm.transport_name() == expected, "rank {}: over {}, not {}", rank, comm.transport_name(), expected);
    std::vector<float> data(1000, static_cast<float>(rank + 1));
    comm.all_reduce(std::span(data));
    for (float x : data) require(x == 15.0f, "rank {}: all_reduce gave {}, not 15", rank, x);
    // Point to point within each host: 0 -> 1 on host a (TCP), 3 -> 4 on host b (shared memory).
    std::vector<std::byte> message(4096, std::byte{7});
    if (rank == 0 || rank == 3) comm.send(message, rank + 1);
    if (rank == 1 || rank == 4) {
      std::vector<std::byte> got(message.size());
      comm.recv(got, rank - 1);
      require(got == message, "rank {}: the message from rank {} differs", rank, rank - 1);
    }
    comm.barrier();
  });
  for (int rank = 0; rank < 5; ++rank) EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

// Auto's choice for 1001 elements, and one-shot through the host's cells for 100.
TEST(Communicator, EveryOpAndTypeIsExact) {
  run_group(3, [](Communicator& comm) {
    for (DataType type : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (const auto& [count, algorithm] : {std::pair<std::uint64_t, std::string>{1001, ""}, {100, "one-shot"}}) {
          std::vector<std::byte> data(count * size_of(type));
          oracle::fill_inputs(type, op, comm.rank(), 0, data.data(), count);
          comm.run({Collective::AllReduce, data.data(), data.data(), count, type, op, 0}, {.algorithm = algorithm});
          std::uint64_t wrong = oracle::count_wrong(type, op, comm.size(), -1, 0, data.data(), count);
          require(wrong == 0, "all_reduce {} {} {}: {} wrong", to_string(type), to_string(op), algorithm, wrong);
        }
      }
    }
  });
}

TEST(Communicator, AllReduceLeavesBitIdenticalFloatsOnEveryRank) {
  run_group(5, check_bit_identical_all_reduces);
}

// The one-shot algorithms through the host's cells leave the bits their schedules leave (the simulator runs
// those on plain memory): random floats, every root, in and out of place, sums and maxima. Auto takes
// one-shot for a small all-reduce where the cells carry it, and over TCP there are none.
TEST(Communicator, OneShotThroughTheCellsLeavesItsSchedulesBits) {
  constexpr int kRanks = 4;
  constexpr std::uint64_t kCount = 300;  // 1200 bytes: within the default 4 KiB cells
  auto inputs_of = [](int rank, std::uint64_t salt) {
    std::mt19937 random(static_cast<unsigned>(1000 * rank + salt));
    std::uniform_real_distribution<float> value(-1e3f, 1e3f);
    std::vector<float> data(kCount);
    for (float& x : data) x = value(random);
    return data;
  };
  run_group(kRanks, [&](Communicator& comm) {
    require(comm.transport_name() == "shm+tcp", "over {}", comm.transport_name());
    std::vector<float> probe(kCount);
    const auto choice = comm.choose_algorithm({Collective::AllReduce, probe.data(), probe.data(), kCount,
                                               DataType::Float32, ReduceOp::Sum, 0});
    require(choice.name == "one-shot", "auto chose {}: {}", choice.name, choice.explanation);
    std::uint64_t salt = 0;
    for (Collective kind : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce}) {
      const collectives::Algorithm& one_shot = *collectives::find_algorithm(kind, "one-shot");
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
        for (int root = 0; root < (kind == Collective::AllReduce ? 1 : kRanks); ++root) {
          for (bool in_place : {false, true}) {
            ++salt;
            std::vector<float> input = inputs_of(comm.rank(), salt), output(kCount, -7.0f);
            float* out = in_place ? input.data() : output.data();
            comm.run({kind, input.data(), out, kCount, DataType::Float32, op, root}, {.algorithm = "one-shot"});
            collectives::CollectiveCall call;
            call.collective = kind;
            call.size = kRanks;
            call.count = kCount;
            call.root = root;
            std::vector<std::vector<std::byte>> every_input;
            for (int r = 0; r < kRanks; ++r) {
              const std::vector<float> theirs = inputs_of(r, salt);
              const auto* bytes = reinterpret_cast<const std::byte*>(theirs.data());
              every_input.emplace_back(bytes, bytes + kCount * sizeof(float));
            }
            const auto expected =
                collectives::simulate(one_shot, call, DataType::Float32, op, std::move(every_input)).data;
            if (kind == Collective::Reduce && comm.rank() != root) continue;
            require(std::memcmp(out, expected[static_cast<std::size_t>(comm.rank())].data(), kCount * sizeof(float)) == 0,
                    "{} {} root {}{}: rank {} differs from the schedule's bits", to_string(kind), to_string(op), root,
                    in_place ? " in place" : "", comm.rank());
          }
        }
      }
    }
  });
}

// Ranks on emulated hosts (CANOPY_HOST_ID): dealt round-robin, or uneven. The host-aware rings and
// chains and the two-level algorithms build on the layout; every algorithm stays exact, and every
// all-reduce bit-identical.
struct EmulatedHosts {
  const char* name;
  std::vector<int> host_of_rank;
};

class AcrossEmulatedHosts : public ::testing::TestWithParam<EmulatedHosts> {};

TEST_P(AcrossEmulatedHosts, EveryAlgorithmIsExactAndEveryAllReduceBitIdentical) {
  const std::vector<int>& hosts = GetParam().host_of_rank;
  const int p = static_cast<int>(hosts.size());
  testing::TempDir dir;
  CommunicatorOptions options = test_options();
  options.local_rank = options.local_size = -1;  // from the layout
  auto exits = testing::run_processes(
      p,
      [&](int rank) {
        testing::ScopedEnv env;  // in the forked rank
        env.set("CANOPY_HOST_ID", fmt::format("host {}", hosts[static_cast<std::size_t>(rank)]));
        Communicator comm(open_file_store(dir.path()), rank, p, options);
        // The override took: this rank's host holds the ranks the layout puts there, no more.
        const int mine = hosts[static_cast<std::size_t>(rank)];
        require(comm.local_size() == static_cast<int>(std::count(hosts.begin(), hosts.end(), mine)),
                "rank {} sees {} ranks on its host", rank, comm.local_size());
        check_every_algorithm(comm);
        check_bit_identical_all_reduces(comm);
      },
      std::chrono::seconds(120));
  for (int rank = 0; rank < p; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

INSTANTIATE_TEST_SUITE_P(Layouts, AcrossEmulatedHosts,
                         ::testing::Values(EmulatedHosts{"RoundRobin2x3", {0, 1, 0, 1, 0, 1}},
                                           EmulatedHosts{"Uneven3And1", {0, 0, 1, 0}}),
                         [](const ::testing::TestParamInfo<EmulatedHosts>& param) {
                           return param.param.name;
                         });

// With the links between hosts far slower than those within (fixed by CANOPY_COST_MODEL's second group),
// auto takes the two-level all-reduce for a large buffer on 2 hosts of 3 ranks and says why.
TEST(Communicator, AutoChoosesTwoLevelsWhereHostsAreFarApartAndSaysWhy) {
  testing::TempDir dir;
  CommunicatorOptions options = test_options();
  options.calibrate = true;  // to read CANOPY_COST_MODEL
  auto exits = testing::run_processes(6, [&](int rank) {
    testing::ScopedEnv env;  // in the forked rank
    env.set("CANOPY_HOST_ID", rank % 2 == 0 ? "host a" : "host b");
    env.set("CANOPY_COST_MODEL", "20e-6,5e-10,1e-10;100e-6,4e-8");
    Communicator comm(open_file_store(dir.path()), rank, 6, options);
    const Communicator::LinkEstimate link = comm.link_estimate();
    require(link.alpha_between_hosts_seconds == 100e-6 && link.beta_between_hosts_seconds_per_byte == 4e-8 &&
                link.description.find("between hosts") != std::string::npos,
            "rank {}: {}", rank, link.description);
    std::vector<float> data(4 << 20, 1.0f);
    const CollectiveArgs args{
        Collective::AllReduce, data.data(), data.data(), data.size(), DataType::Float32, ReduceOp::Sum, 0};
    const Communicator::AlgorithmChoice choice = comm.choose_algorithm(args);
    require(choice.name == "two-level" &&
                choice.explanation.find("on 2 hosts x 3 ranks the best two-level") != std::string::npos,
            "rank {}: {}", rank, choice.explanation);
    comm.run(args);
    require(std::all_of(data.begin(), data.end(), [](float x) { return x == 6.0f; }), "rank {}: wrong sum",
            rank);
  });
  for (int rank = 0; rank < 6; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

// Nobody leaves a barrier before everybody arrived, whatever the algorithm (one-shot's through the cells):
// each rank leaves a file when it arrives, late by its rank, and looks for everyone's once it leaves.
TEST(Communicator, EveryBarrierWaitsForTheLastRank) {
  testing::TempDir arrivals;
  run_group(4, [&](Communicator& comm) {
    for (const auto& algorithm : collectives::algorithms(Collective::Barrier)) {
      const std::string name(algorithm.name);
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * comm.rank()));
      std::ofstream(fmt::format("{}/{}-{}", arrivals.path(), name, comm.rank())).put('x');
      comm.run({Collective::Barrier, nullptr, nullptr, 0, DataType::UInt8, ReduceOp::Sum, 0}, {.algorithm = name});
      for (int r = 0; r < comm.size(); ++r)
        require(std::ifstream(fmt::format("{}/{}-{}", arrivals.path(), name, r)).good(),
                "{}: rank {} left before rank {} arrived", name, comm.rank(), r);
    }
  });
}

// A size that differs is a Mismatch naming both calls, through messages (ring) and through the host's cells
// (one-shot); a rank that read no differing message or cell reports the failure the first rank reported.
TEST(Communicator, AsyncCollectivesCompleteInIssueOrder) {
  run_group(3, [](Communicator& comm) {
    std::vector<std::vector<std::int32_t>> buffers(6, std::vector<std::int32_t>(5000));
    std::vector<Work> works;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      for (auto& x : buffers[i]) x = static_cast<std::int32_t>(i + comm.rank());
      works.push_back(comm.all_reduce_async(std::span(buffers[i])));
    }
    std::vector<std::int32_t> blocking(10, comm.rank());
    comm.all_reduce(std::span(blocking));  // joins the same order
    for (auto& work : works) work.wait();
    for (std::size_t i = 0; i < buffers.size(); ++i)
      require(buffers[i][4999] == static_cast<std::int32_t>(3 * i + 3), "buffer {} holds {}", i, buffers[i][4999]);
    require(blocking[0] == 3, "blocking result {}", blocking[0]);
  });
}

TEST(Communicator, PointToPointKeepsOrder) {
  run_group(2, [](Communicator& comm) {
    for (std::uint32_t i = 0; i < 200; ++i) {
      std::uint32_t value = i;
      if (comm.rank() == 0) {
        comm.send(std::as_bytes(std::span(&value, 1)), 1, 7);
      } else {
        comm.recv(std::as_writable_bytes(std::span(&value, 1)), 0, 7);
        require(value == i, "message {} arrived as {}", i, value);
      }
    }
  });
}

// failure() is empty while the communicator is usable, and afterwards says what ended it, with the code
// its later calls raise.
TEST(Communicator, StartUpLearnsTheHostLayoutAndCalibratesTheSameModelEverywhere) {
  testing::TempDir dir;
  CommunicatorOptions options = test_options();
  options.calibrate = true;
  options.local_rank = -1;
  options.local_size = -1;
  auto exits = testing::run_processes(4, [&](int rank) {
    testing::ScopedEnv env;  // in the forked rank
    env.set("CANOPY_HOST_ID", rank < 2 ? "host a" : "host b");
    auto store = open_file_store(dir.path());
    Communicator comm(store, rank, 4, options);
    require(comm.local_rank() == rank % 2 && comm.local_size() == 2, "rank {}: local rank {} of {}", rank,
            comm.local_rank(), comm.local_size());
    const Communicator::LinkEstimate link = comm.link_estimate();
    require(link.alpha_seconds > 0 && link.beta_seconds_per_byte > 0 && link.gamma_seconds_per_byte > 0 &&
                link.beta_eager_seconds_per_byte > 0 &&
                link.beta_eager_seconds_per_byte <= link.beta_seconds_per_byte && link.eager_bytes == 1 << 20,
            "rank {}: implausible model {}", rank, link.description);
    require(link.alpha_between_hosts_seconds > 0 && link.beta_between_hosts_seconds_per_byte > 0 &&
                link.description.find("between hosts") != std::string::npos,
            "rank {}: no figures between hosts in {}", rank, link.description);
    const bool shared = 2 > usable_cores();
    require((link.description.find("2 ranks share") != std::string::npos) == shared,
            "rank {}: on {} cores the model says {}", rank, usable_cores(), link.description);
    store->set(fmt::format("model/{}", rank), link.description);
    for (int other = 0; other < 4; ++other) {
      const std::string theirs = store->get(fmt::format("model/{}", other));
      require(theirs == link.description, "rank {} has '{}', rank {} '{}'", rank, link.description, other, theirs);
    }
  });
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

}  // namespace
}  // namespace canopy

namespace canopy {
namespace {

// Broadcasts back to back: from the third in a row auto chooses for a stream's pace (the chain, one
// message per rank per call) instead of one call's latency. Only the root knows how soon it calls
// again, so its flag travels with the call's data and every rank switches alike (a rank that chose
// otherwise would fail the next call with a mismatch; the test also compares every rank's choices). A
// pause at the root longer than one call's latency, or any other collective between, always brings back
// the one-call choice. A stream may also break where the test cannot see it (a root descheduled between
// two calls for longer than one call's latency, as under a sanitizer on a loaded machine): such calls
// may choose for one call, and are counted. The model is fixed with a large alpha (5 ms: one call's
// latency is about 10 ms) so that a slow loop still calls back to back, and a 50 ms pause never does.
TEST(Communicator, BroadcastsBackToBackChooseForTheStreamOnEveryRankAlike) {
  testing::TempDir dir;
  CommunicatorOptions options = test_options();
  options.calibrate = true;  // to read CANOPY_COST_MODEL
  constexpr int kRanks = 4;
  constexpr int kCalls = 200;
  auto exits = testing::run_processes(kRanks, [&](int rank) {
    testing::ScopedEnv env;  // in the forked rank
    env.set("CANOPY_COST_MODEL", "5e-3,1e-9,1e-10");
    // Through the host's cells one-shot wins both paces; the rule is about the choices that differ (the
    // flags reach the readers through the cells too: host_cells_test.cpp).
    env.set("CANOPY_SHM_CELL_BYTES", "0");
    Communicator comm(open_file_store(dir.path()), rank, kRanks, options);
    std::vector<float> data(16), token(1);
    auto broadcast_args = [&](int root) {
      return CollectiveArgs{Collective::Broadcast, data.data(), data.data(), data.size(), DataType::Float32,
                            ReduceOp::Sum, root};
    };
    const std::string one_call = comm.choose_algorithm(broadcast_args(0)).name;
    require(one_call != "chain", "one call: {}", one_call);
    std::mt19937 pick(11);  // the same sequence on every rank
    std::vector<std::int32_t> streamed(kCalls, 0);  // this rank's choice per call: 1 for the stream's
    int expected_in_stream = 0, broken_unseen = 0;
    bool stream = false;                  // what every rank should now believe, unless a break went unseen
    bool previous_was_broadcast = false;  // with nothing between
    for (int call = 0; call < kCalls; ++call) {
      const int root = static_cast<int>(pick() % kRanks);
      const unsigned interruption = pick() % 12;
      if (interruption == 0) {
        comm.all_reduce(std::span(token));
        stream = previous_was_broadcast = false;
      }
      const bool root_pauses = interruption == 1;
      if (root_pauses && rank == root) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::string chosen = comm.choose_algorithm(broadcast_args(root)).name;
      require(chosen == one_call || chosen == "chain", "call {}: chose {}", call, chosen);
      streamed[call] = chosen == "chain" ? 1 : 0;
      if (stream) {
        ++expected_in_stream;
        broken_unseen += 1 - streamed[call];
      } else {
        require(chosen == one_call, "call {} (root {}): {} with the stream broken", call, root, chosen);
      }
      for (std::size_t i = 0; i < data.size(); ++i)
        data[i] = rank == root ? static_cast<float>(call * 100 + static_cast<int>(i)) : -1.0f;
      comm.broadcast(std::span(data), root);
      for (std::size_t i = 0; i < data.size(); ++i)
        require(data[i] == static_cast<float>(call * 100 + static_cast<int>(i)), "call {}: element {} is {}",
                call, i, data[i]);
      stream = previous_was_broadcast && !root_pauses;
      previous_was_broadcast = true;
    }
    require(expected_in_stream > 100 && broken_unseen * 4 < expected_in_stream,
            "{} of {} calls in a stream chose for one call", broken_unseen, expected_in_stream);
    std::vector<std::int32_t> everyone(kCalls * kRanks);
    comm.all_gather(std::span<const std::int32_t>(streamed), std::span(everyone));
    for (int other = 0; other < kRanks; ++other)
      require(std::equal(streamed.begin(), streamed.end(), everyone.begin() + other * kCalls),
              "rank {} and rank {} chose differently", rank, other);
  });
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

}  // namespace
}  // namespace canopy
