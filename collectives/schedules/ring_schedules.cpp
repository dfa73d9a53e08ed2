// Rings: rank r sends to r+1 and receives from r-1, p-1 rounds per phase, one block per round, each
// block chunk by chunk so that a chunk received in round s is forwarded in round s+1 while the rest
// of the block is still arriving. Every link carries (p-1)/p n per phase: bandwidth-optimal.
#include "collectives/schedules/builders.hpp"

namespace canopy::collectives {
namespace {

int modulo(int a, int p) {
  return ((a % p) + p) % p;
}

struct Ring {
  int next;
  int prev;
  explicit Ring(const CollectiveCall& call)
      : next(modulo(call.rank + 1, call.size)), prev(modulo(call.rank - 1, call.size)) {}
};

}  // namespace

// Reduce-scatter then all-gather over p near-equal parts of the buffer. In reduce-scatter round s,
// rank r passes on its partial of part r-s and folds r-1's partial of part r-s-1 into its own: after
// p-1 rounds rank r holds part r+1 complete, which the all-gather then circulates. Each part is
// reduced along one path and copied everywhere else: bit-identical on all ranks.
// 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
Schedule all_reduce_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const Ring ring(call);
  auto part = [&](int i) { return part_of(call.count, p, modulo(i, p)); };
  for (int s = 0; s + 1 < p; ++s) {
    writer.exchange_reduce_chunks(ring.next, part(r - s), ring.prev, part(r - s - 1),
                                  static_cast<std::uint32_t>(s), /*incoming_first=*/false);
  }
  for (int s = 0; s + 1 < p; ++s) {
    writer.exchange_chunks(ring.next, part(r + 1 - s), ring.prev, part(r - s),
                           static_cast<std::uint32_t>(p - 1 + s));
  }
  return std::move(writer).finish();
}

// In round s, rank r passes on block r-s (its own first, then what it received in round s-1).
// (p-1) alpha + (p-1)/p n beta, n = all p blocks.
Schedule all_gather_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const Ring ring(call);
  auto block = [&](int i) {
    return data_block(static_cast<std::uint64_t>(modulo(i, p)) * call.count, call.count);
  };
  for (int s = 0; s + 1 < p; ++s) {
    writer.exchange_chunks(ring.next, block(r - s), ring.prev, block(r - s - 1),
                           static_cast<std::uint32_t>(s));
  }
  return std::move(writer).finish();
}

// In round s, rank r passes on its partial of block r-s-1 and folds r-1's partial of block r-s-2
// into its own; the last round completes block r at rank r.
// (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma.
Schedule reduce_scatter_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const Ring ring(call);
  auto block = [&](int i) {
    return data_block(static_cast<std::uint64_t>(modulo(i, p)) * call.count, call.count);
  };
  for (int s = 0; s + 1 < p; ++s) {
    writer.exchange_reduce_chunks(ring.next, block(r - s - 1), ring.prev, block(r - s - 2),
                                  static_cast<std::uint32_t>(s), false);
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
