// The executor runs every algorithm's schedule to the exact result over a transport that buffers
// nothing: no algorithm may depend on the network holding messages that nobody receives yet.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/executor.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "tests/collectives/unbuffered_transport.hpp"
#include "oracle/exact_values.hpp"
#include "oracle/rank_result.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::collectives {
namespace {

using canopy::testing::require;

struct Case {
  Collective collective;
  int ranks;
};

class UnbufferedExecution : public ::testing::TestWithParam<Case> {};

TEST_P(UnbufferedExecution, EveryAlgorithmFinishesExactly) {
  const auto [collective, p] = GetParam();
  const DataType type = DataType::Int32;
  const ReduceOp op = ReduceOp::Sum;
  for (const Algorithm& algorithm : algorithms(collective)) {
    for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{1000}}) {
      auto hub = std::make_shared<canopy::testing::UnbufferedHub>(p);
      canopy::testing::run_threads(p, [&](int rank) {
        CollectiveCall call{collective, rank, p, count, (p - 1) / 2, /*chunk_count=*/64};
        CompiledSchedule compiled(algorithm.build(call), p);
        std::uint64_t data_count = call.data_count();
        std::vector<std::int32_t> data(data_count + 1), staging(compiled.schedule.staging_count + 1);
        bool blocked = collective == Collective::AllGather;
        oracle::fill_inputs(type, op, rank, 0, data.data() + (blocked ? rank * count : 0), blocked ? count : data_count);
        canopy::testing::UnbufferedTransport transport(hub, rank);
        ExecutionContext context;
        context.transport = &transport;
        context.envelope.collective = collective;
        context.data = reinterpret_cast<std::byte*>(data.data());
        context.staging = reinterpret_cast<std::byte*>(staging.data());
        context.element_size = sizeof(std::int32_t);
        context.dtype = type;
        context.op = op;
        context.deadline = Deadline::after(std::chrono::seconds(10));
        Executor executor;
        try {
          executor.run(compiled, context);
        } catch (const Error& e) {
          throw std::runtime_error(fmt::format("{} on {} ranks, count {}: {}", algorithm.name, p, count, e.what()));
        }
        // A reduce-scatter's result is this rank's block of the data; the others fill the data from its start.
        std::int32_t* result = data.data() + (collective == Collective::ReduceScatter ? rank * count : 0);
        const oracle::RankResult expected{collective, type, op, rank, p, call.root, count};
        const std::uint64_t wrong = oracle::count_wrong(expected, result);
        require(wrong == 0, "{} on {} ranks, count {}: {} wrong on rank {}", algorithm.name, p, count, wrong, rank);
        // The oracle sees one element changed, wherever this rank holds a result.
        const bool holds_result =
            collective != Collective::Barrier && (collective != Collective::Reduce || rank == call.root);
        result[count - 1] += 1;
        require(oracle::count_wrong(expected, result) == (holds_result ? 1u : 0u),
                "the oracle missed a changed element of {}'s result on rank {}", algorithm.name, rank);
      });
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                       Collective::ReduceScatter, Collective::Barrier})
    for (int p : {1, 2, 3, 4, 5, 8}) all.push_back({c, p});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Schedules, UnbufferedExecution, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::string(to_string(param_info.param.collective)) + "_" +
                                  std::to_string(param_info.param.ranks) + "_ranks";
                         });

}  // namespace
}  // namespace canopy::collectives
