// Recursive doubling and halving: lg p rounds of pairwise exchanges between new ranks v and v ^ mask.
// On a size that is not a power of two the extra ranks are folded in first (see Fold): each even
// rank r < 2 * extra hands its data to r + 1 in round 0 and gets the result back in the last round.
#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {
namespace {

// The Data of original ranks [first, last) of a blocked collective (all-gather, reduce-scatter).
Block rank_blocks(const CollectiveCall& call, int first, int last) {
  return data_block(static_cast<std::uint64_t>(first) * call.count,
                    static_cast<std::uint64_t>(last - first) * call.count);
}

// In the exchange between new ranks v and partner, the partner's operand covers lower ranks when the
// partner is lower: it goes on the left, on both sides, so both evaluate the same expression.
bool partner_first(int v, int partner_v) {
  return partner_v < v;
}

// Recursive halving from round `round` on: each round, keep the half of the current range of the pow2
// units (parts of the buffer, or new ranks' blocks) that holds unit v, send the other half to the
// partner and reduce the partner's copy of the kept half into ours. `blocks(first, last)` is the buffer
// of units [first, last). Rank v ends owning unit v; returns the next round.
template <typename Blocks>
std::uint32_t reduce_by_halving(StepWriter& writer, const Fold& fold, int v, std::uint32_t round,
                                const Blocks& blocks) {
  int lo = 0;
  int hi = fold.pow2;  // aligned, containing v
  for (int mask = fold.pow2 / 2; mask >= 1; mask /= 2, ++round) {
    const int partner_v = v ^ mask;
    const int mid = (lo + hi) / 2;
    const bool lower = v < partner_v;
    const Block give = lower ? blocks(mid, hi) : blocks(lo, mid);
    if (lower)
      hi = mid;
    else
      lo = mid;
    writer.exchange_reduce_chunks(fold.real_rank(partner_v), give, fold.real_rank(partner_v), blocks(lo, hi),
                                  round, partner_first(v, partner_v));
  }
  return round;
}

// The fold of an all-reduce, before the rounds: a rank that sits out hands its whole buffer to r + 1 and
// gets the result back in `last_round` (true: it has nothing else to do); one that absorbs reduces
// r - 1's buffer into its own. After the rounds, fold_out_whole_buffer gives r - 1 the result.
bool fold_in_whole_buffer(StepWriter& writer, const Fold& fold, int r, const Block& data,
                          std::uint32_t last_round) {
  if (fold.sits_out(r)) {
    writer.send_chunks(r + 1, data, 0);
    writer.recv_chunks(r + 1, data, last_round);
    return true;
  }
  if (fold.absorbs(r)) writer.recv_reduce_chunks(r - 1, data, 0, /*incoming_first=*/true);
  return false;
}

void fold_out_whole_buffer(StepWriter& writer, const Fold& fold, int r, const Block& data,
                           std::uint32_t last_round) {
  if (fold.absorbs(r)) writer.send_chunks(r - 1, data, last_round);
}

}  // namespace

// Every round, exchange the whole buffer with the partner and reduce: after lg p rounds every rank
// holds everything. lg p (alpha + n beta + n gamma), plus 2 (alpha + n beta) for the fold.
Schedule all_reduce_recursive_doubling(const CollectiveCall& call) {
  StepWriter writer(call);
  const Fold fold(call.size);
  const int r = call.rank;
  const Block data = data_block(0, call.count);
  const auto last_round = static_cast<std::uint32_t>(1 + ceil_log2(fold.pow2));
  if (fold_in_whole_buffer(writer, fold, r, data, last_round)) return std::move(writer).finish();
  const int v = fold.new_rank(r);
  std::uint32_t round = 1;
  for (int mask = 1; mask < fold.pow2; mask *= 2, ++round) {
    const int partner = fold.real_rank(v ^ mask);
    writer.exchange_reduce_chunks(partner, data, partner, data, round, partner_first(v, v ^ mask));
  }
  fold_out_whole_buffer(writer, fold, r, data, last_round);
  return std::move(writer).finish();
}

// Rabenseifner: a reduce-scatter by recursive halving (each round, keep half of the current range,
// send the other half to the partner and reduce the partner's copy of the kept half), then an
// all-gather by recursive doubling in the opposite order. The buffer is cut in pow2 parts; new rank v
// ends the halving owning part v. 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
Schedule all_reduce_rabenseifner(const CollectiveCall& call) {
  StepWriter writer(call);
  const Fold fold(call.size);
  const int r = call.rank;
  const Block data = data_block(0, call.count);
  const auto last_round = static_cast<std::uint32_t>(1 + 2 * ceil_log2(fold.pow2));
  if (fold_in_whole_buffer(writer, fold, r, data, last_round)) return std::move(writer).finish();
  const int v = fold.new_rank(r);
  auto parts = [&](int first, int last) { return parts_of(call.count, fold.pow2, first, last); };

  std::uint32_t round = reduce_by_halving(writer, fold, v, 1, parts);
  int lo = v;
  int hi = v + 1;  // the parts this rank holds reduced: aligned, containing v
  for (int mask = 1; mask < fold.pow2; mask *= 2, ++round) {
    const int partner_v = v ^ mask;
    const int partner_lo = lo ^ mask;  // the partner's aligned range of `mask` parts
    writer.exchange_chunks(fold.real_rank(partner_v), parts(lo, hi), fold.real_rank(partner_v),
                           parts(partner_lo, partner_lo + mask), round);
    lo = std::min(lo, partner_lo);
    hi = lo + 2 * mask;
  }
  fold_out_whole_buffer(writer, fold, r, data, last_round);
  return std::move(writer).finish();
}

// All-gather by recursive doubling: each round, swap everything gathered so far with the partner
// (the group of `mask` new ranks next to ours). A group of new ranks speaks for a contiguous range of
// original ranks, so every message is one contiguous block. lg p alpha + (p-1)/p n beta (+ the fold:
// the folded ranks get everything but their own block at the end).
Schedule all_gather_recursive_doubling(const CollectiveCall& call) {
  StepWriter writer(call);
  const Fold fold(call.size);
  const int r = call.rank;
  const int size = call.size;
  const auto last_round = static_cast<std::uint32_t>(1 + ceil_log2(fold.pow2));
  if (fold.sits_out(r)) {
    writer.send_chunks(r + 1, rank_blocks(call, r, r + 1), 0);
    writer.recv_chunks(r + 1, rank_blocks(call, 0, r), last_round);
    writer.recv_chunks(r + 1, rank_blocks(call, r + 1, size), last_round + 1);
    return std::move(writer).finish();
  }
  if (fold.absorbs(r)) writer.recv_chunks(r - 1, rank_blocks(call, r - 1, r), 0);
  const int v = fold.new_rank(r);
  auto group_blocks = [&](int first_v, int count_v) {
    return rank_blocks(call, fold.first_rank(first_v), fold.first_rank(first_v + count_v));
  };
  std::uint32_t round = 1;
  for (int mask = 1; mask < fold.pow2; mask *= 2, ++round) {
    const int group = v & ~(mask - 1);
    const int partner = fold.real_rank(v ^ mask);
    writer.exchange_chunks(partner, group_blocks(group, mask), partner, group_blocks(group ^ mask, mask),
                           round);
  }
  if (fold.absorbs(r)) {
    writer.send_chunks(r - 1, rank_blocks(call, 0, r - 1), last_round);
    writer.send_chunks(r - 1, rank_blocks(call, r, size), last_round + 1);
  }
  return std::move(writer).finish();
}

// Reduce-scatter by recursive halving: each round, keep the half of the current range of new ranks
// that contains ours, send the other half's blocks to the partner and reduce the partner's copy of
// ours. lg p alpha + (p-1)/p n beta + (p-1)/p n gamma (+ the fold: a folded rank sends its whole input
// and gets its block back).
Schedule reduce_scatter_recursive_halving(const CollectiveCall& call) {
  StepWriter writer(call);
  const Fold fold(call.size);
  const int r = call.rank;
  const Block everything = rank_blocks(call, 0, call.size);
  const auto last_round = static_cast<std::uint32_t>(1 + ceil_log2(fold.pow2));
  if (fold.sits_out(r)) {
    writer.send_chunks(r + 1, everything, 0);
    writer.recv_chunks(r + 1, rank_blocks(call, r, r + 1), last_round);
    return std::move(writer).finish();
  }
  if (fold.absorbs(r)) writer.recv_reduce_chunks(r - 1, everything, 0, /*incoming_first=*/true);
  const int v = fold.new_rank(r);
  auto group_blocks = [&](int first_v, int last_v) {
    return rank_blocks(call, fold.first_rank(first_v), fold.first_rank(last_v));
  };
  reduce_by_halving(writer, fold, v, 1, group_blocks);
  if (fold.absorbs(r)) writer.send_chunks(r - 1, rank_blocks(call, r - 1, r), last_round);
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
