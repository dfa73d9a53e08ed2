#include "oracle/rank_result.hpp"

#include "oracle/exact_values.hpp"

namespace canopy::oracle {

std::uint64_t count_wrong(const RankResult& call, const void* result) {
  const auto* out = static_cast<const std::byte*>(result);
  const std::uint64_t n = call.block;
  const std::uint64_t bytes = n * size_of(call.type);
  const auto mine = static_cast<std::uint64_t>(call.rank) * n;
  // Block `from` of a result gathered from every rank: `from`'s elements first_index.. .
  auto count_gathered = [&](std::uint64_t first_index) {
    std::uint64_t wrong = 0;
    for (int from = 0; from < call.ranks; ++from)
      wrong += count_wrong(call.type, call.op, call.ranks, from, first_index, out + from * bytes, n);
    return wrong;
  };
  switch (call.collective) {
    case Collective::AllReduce:
      return count_wrong(call.type, call.op, call.ranks, -1, 0, out, n);
    case Collective::Broadcast:
      return count_wrong(call.type, call.op, call.ranks, call.root, 0, out, n);
    case Collective::Reduce:
      return call.rank == call.root ? count_wrong(call.type, call.op, call.ranks, -1, 0, out, n) : 0;
    case Collective::AllGather:
      return count_gathered(0);
    case Collective::ReduceScatter:
      return count_wrong(call.type, call.op, call.ranks, -1, mine, out, n);
    case Collective::AllToAll:
      return count_gathered(mine);
    case Collective::Gather:
      return call.rank == call.root ? count_gathered(0) : 0;
    case Collective::Scatter:
      return count_wrong(call.type, call.op, call.ranks, call.root, mine, out, n);
    default:
      return 0;
  }
}

}  // namespace canopy::oracle
