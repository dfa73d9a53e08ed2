// Soak: one 4-rank job over real TCP runs CANOPY_SOAK_COLLECTIVES collectives (default 10,000) of
// mixed kinds, sizes, types, ops and algorithms, every result checked exactly on every rank. Each rank
// reports its resident memory after a warm-up pass over every combination and at the end; the end
// must stay within a generous bound of the start (a leak per call would show as megabytes).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "tests/reliability/leak_check.hpp"
#include "tests/reliability/settings.hpp"
#include "tests/support/process_group.hpp"
#include "oracle/exact_values.hpp"
#include "oracle/rank_result.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::reliability {
namespace {

using testing::Clock;
using testing::ProcessEnd;
using testing::ProcessGroup;
using testing::Reporter;

constexpr int kRanks = 4;
constexpr Collective kKinds[] = {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                                 Collective::AllGather, Collective::ReduceScatter};
// Mostly small calls, as a training loop's many small tensors, with a few large ones among them.
constexpr std::uint64_t kCounts[] = {0, 1, 3, 17, 255, 1024, 4099, 16384, 65537, 262147};
constexpr DataType kTypes[] = {DataType::Float32, DataType::Int32, DataType::Float64, DataType::BFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

struct Call {
  Collective kind;
  std::string algorithm;
  std::uint64_t count;
  DataType type;
  ReduceOp op;
  int root;
};

// Elements of every rank's input and output buffers for one call.
std::uint64_t input_count(const Call& call) {
  return call.kind == Collective::ReduceScatter ? call.count * kRanks : call.count;
}
std::uint64_t output_count(const Call& call) {
  return call.kind == Collective::AllGather ? call.count * kRanks : call.count;
}

// Runs one call and counts the wrong elements this rank holds afterwards.
std::uint64_t run_and_check(Communicator& comm, const Call& call, std::vector<std::byte>& input,
                            std::vector<std::byte>& output) {
  const std::size_t element = size_of(call.type);
  const int r = comm.rank();
  input.resize(input_count(call) * element);
  output.resize(output_count(call) * element);
  oracle::fill_inputs(call.type, call.op, r, 0, input.data(), input_count(call));
  comm.run({call.kind, input.data(), output.data(), call.count, call.type, call.op, call.root},
           {.algorithm = call.algorithm});
  // A broadcast's root reads its input; the others' results are in their outputs.
  const bool root_of_broadcast = call.kind == Collective::Broadcast && r == call.root;
  return oracle::count_wrong({call.kind, call.type, call.op, r, kRanks, call.root, call.count},
                             root_of_broadcast ? input.data() : output.data());
}

Call random_call(std::mt19937_64& random) {
  Call call;
  call.kind = kKinds[random() % std::size(kKinds)];
  auto algorithms = collectives::algorithms(call.kind);
  call.algorithm = std::string(algorithms[random() % algorithms.size()].name);
  // Large counts one call in ten, so that 10,000 calls stay a few minutes at most on 2 cores.
  std::size_t size_index = random() % std::size(kCounts);
  if (size_index >= 8 && random() % 10 != 0) size_index -= 4;
  call.count = kCounts[size_index];
  call.type = kTypes[random() % std::size(kTypes)];
  call.op = kOps[random() % std::size(kOps)];
  call.root = static_cast<int>(random() % kRanks);
  return call;
}

TEST(Soak, MixedCollectivesStayExactAndResidentMemoryStaysFlat) {
  testing::ScopedEnv env;
  use_loopback_only(env);
  const long long total = setting("CANOPY_SOAK_COLLECTIVES", 10'000);
  testing::TempDir dir;
  ProcessGroup group(kRanks, [&](int rank, const Reporter& reporter) {
    CommunicatorOptions options = test_communicator_options();
    options.timeout = std::chrono::seconds(60);  // a soak is not about deadlines; a loaded machine is slow
    Communicator comm(open_file_store(dir.path()), rank, kRanks, options);
    std::vector<std::byte> input, output;
    long long calls = 0;
    auto check = [&](const Call& call) {
      std::uint64_t wrong = run_and_check(comm, call, input, output);
      ++calls;
      if (wrong != 0)
        throw std::runtime_error(fmt::format("call {}: {} {} {} elements {} {} root {}: {} wrong elements",
                                             calls, to_string(call.kind), call.algorithm, call.count,
                                             to_string(call.type), to_string(call.op), call.root, wrong));
    };
    // Warm-up: every kind and algorithm at the largest size, so that buffers, staging and schedule
    // caches have grown to what the soak needs before the first measurement.
    for (Collective kind : kKinds)
      for (const auto& algorithm : collectives::algorithms(kind))
        check({kind, std::string(algorithm.name), kCounts[std::size(kCounts) - 1], DataType::Float64,
               ReduceOp::Sum, 0});
    const long long start_rss = resident_bytes();
    std::mt19937_64 random(99);  // the same sequence on every rank
    const long long warm_up_calls = calls;
    while (calls - warm_up_calls < total) check(random_call(random));
    comm.barrier();
    const long long end_rss = resident_bytes();
    reporter.outcome(fmt::format("ok {} {} {} {}", calls - warm_up_calls, warm_up_calls, start_rss, end_rss));
  });
  ASSERT_TRUE(group.wait_ended({0, 1, 2, 3}, Clock::now() + std::chrono::minutes(15))) << "the soak hung";

  for (int rank = 0; rank < kRanks; ++rank) {
    const ProcessEnd& end = group.end(rank);
    ASSERT_EQ(end.exit_code, 0) << "rank " << rank << ": " << end.describe();
    long long calls = 0, warm_up_calls = 0, start_rss = 0, end_rss = 0;
    ASSERT_EQ(std::sscanf(end.outcome.c_str(), "ok %lld %lld %lld %lld", &calls, &warm_up_calls, &start_rss,
                          &end_rss),
              4)
        << end.describe();
    EXPECT_EQ(calls, total);
    fmt::print(
        "[soak] rank {}: {} collectives exact (after {} warm-up calls); resident memory {:.1f} MiB after "
        "warm-up, {:.1f} MiB at the end ({:+.1f} MiB)\n",
        rank, calls, warm_up_calls, start_rss / 1048576.0, end_rss / 1048576.0,
        (end_rss - start_rss) / 1048576.0);
    // Generous: allocator slack and page-cache noise are a few MiB; a leak of even 1 KiB per call is
    // 10 MiB over 10,000 calls. Sanitizers keep freed memory in quarantine: report only.
    if (!kUnderSanitizer) {
      EXPECT_LE(end_rss, start_rss + 8 * 1048576) << "rank " << rank << ": resident memory grew";
    }
  }
}

}  // namespace
}  // namespace canopy::reliability
