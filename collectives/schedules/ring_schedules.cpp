// Rings: each member sends to the next and receives from the previous, m-1 rounds per phase, one block
// per round, each block chunk by chunk so that a chunk received in round s is forwarded in round s+1
// while the rest of the block is still arriving. Every link carries (m-1)/m of the data per phase:
// bandwidth-optimal. The flat rings run through every rank host after host (HostGroups::ring_order), so
// they cross between hosts once per host whatever the rank numbering; the two-level algorithms run the
// same pieces through the ranks of one host, or through one rank of each host.
#include <algorithm>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/host_groups.hpp"

namespace canopy::collectives {

Block part_of_block(const Block& whole, int parts, int index) {
  const Block part = part_of(whole.count, parts, index);
  return Block{whole.buffer, whole.offset + part.offset, part.count};
}

namespace {

// The ring pieces below act on `pieces` pieces of data, part(position, k) being position's part of
// piece k. With more than one piece, every part of a piece is at most one chunk; chunk c of piece k's
// part carries tag (round, k + c).
using PartOfPiece = std::function<Block(int position, std::uint64_t piece)>;

// Rounds [from, to) of a ring all-reduce of every piece, as a wavefront: step t holds round t-k of each
// piece k, oldest piece first. The first piece then completes its rounds after as many hops of one
// piece, and every later round of a piece goes on the wire right behind the round before it of the next
// piece, so that no link waits for a piece to drain (messages to a peer leave in step order).
// Round s < m-1 of the reduce-scatter: position i passes on its partial of part i-s-1 and folds
// position i-1's partial of part i-s-2 into its own, so the last one completes part i at position i,
// reduced along one path. Round m-1+s, the all-gather's s: position i passes on part i-s (its own
// first, then what it received the round before). Round s is tagged round + s - from.
std::uint32_t write_rounds(StepWriter& writer, const RingOf& ring, std::uint64_t pieces,
                           const PartOfPiece& part, std::uint32_t round, int from, int to) {
  const int m = ring.size();
  const auto span = static_cast<std::uint64_t>(std::max(0, to - from));
  for (std::uint64_t t = 0; span > 0 && t + 1 < pieces + span; ++t) {
    for (std::uint64_t k = t >= span ? t - span + 1 : 0; k <= t && k < pieces; ++k) {
      const int s = from + static_cast<int>(t - k);
      const std::uint32_t tag_round = round + static_cast<std::uint32_t>(s - from);
      if (s < m - 1) {
        writer.exchange_reduce_chunks(ring.next(), part(ring.position_at(-s - 1), k), ring.prev(),
                                      part(ring.position_at(-s - 2), k), tag_round, /*incoming_first=*/false,
                                      k);
      } else {
        const int g = s - (m - 1);
        writer.exchange_chunks(ring.next(), part(ring.position_at(-g), k), ring.prev(),
                               part(ring.position_at(-g - 1), k), tag_round, k);
      }
    }
  }
  return round + static_cast<std::uint32_t>(span);
}

std::uint32_t write_reduce_scatter(StepWriter& writer, const RingOf& ring, std::uint64_t pieces,
                                   const PartOfPiece& part, std::uint32_t round) {
  return write_rounds(writer, ring, pieces, part, round, 0, ring.size() - 1);
}

std::uint32_t write_all_gather(StepWriter& writer, const RingOf& ring, std::uint64_t pieces,
                               const PartOfPiece& part, std::uint32_t round) {
  return write_rounds(writer, ring, pieces, part, round, ring.size() - 1, 2 * (ring.size() - 1));
}

// Whole parts as one piece, or (chunk by chunk) piece k as chunk k of every part.
std::uint64_t pieces_of(const StepWriter& writer, const RingOf& ring, const PartOfPosition& part,
                        bool chunk_by_chunk) {
  std::uint64_t most = 1;
  for (int position = 0; chunk_by_chunk && position < ring.size(); ++position)
    most = std::max(most, chunk_total(part(position), writer.chunk_count()));
  return most;
}

PartOfPiece pieces(const StepWriter& writer, const PartOfPosition& part, bool chunk_by_chunk) {
  if (!chunk_by_chunk) return [&part](int position, std::uint64_t) { return part(position); };
  return [&part, chunk = writer.chunk_count()](int position, std::uint64_t k) {
    return chunk_of(part(position), chunk, k);
  };
}

}  // namespace

std::uint32_t write_ring_reduce_scatter(StepWriter& writer, const RingOf& ring, const PartOfPosition& part,
                                        std::uint32_t round, bool chunk_by_chunk) {
  return write_reduce_scatter(writer, ring, pieces_of(writer, ring, part, chunk_by_chunk),
                              pieces(writer, part, chunk_by_chunk), round);
}

std::uint32_t write_ring_all_gather(StepWriter& writer, const RingOf& ring, const PartOfPosition& part,
                                    std::uint32_t round, bool chunk_by_chunk) {
  return write_all_gather(writer, ring, pieces_of(writer, ring, part, chunk_by_chunk),
                          pieces(writer, part, chunk_by_chunk), round);
}

// Reduce-scatter, then all-gather, each piece of `block` in ring.size() near-equal parts; position i
// completes part i+1 (so that its first send is its own input's part i, as the textbook ring has it).
std::uint32_t write_ring_all_reduce(StepWriter& writer, const RingOf& ring, const Block& block,
                                    std::uint32_t round, std::uint64_t piece_count) {
  const int m = ring.size();
  const std::uint64_t pieces =
      piece_count == 0 ? 1 : std::max<std::uint64_t>(1, chunk_total(block, piece_count));
  const PartOfPiece part = [&](int position, std::uint64_t k) {
    return part_of_block(piece_count == 0 ? block : chunk_of(block, piece_count, k), m, (position + 1) % m);
  };
  return write_rounds(writer, ring, pieces, part, round, 0, 2 * (m - 1));
}

namespace {

RingOf flat_ring(const CollectiveCall& call) {
  return ring_through(HostGroups::of(call).ring_order(), call.rank);
}

// Rank r's block of an all-gather or reduce-scatter buffer.
Block block_of_rank(const CollectiveCall& call, int rank) {
  return data_block(static_cast<std::uint64_t>(rank) * call.count, call.count);
}

}  // namespace

// Each part is reduced along one path and copied everywhere else: bit-identical on all ranks.
// 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
Schedule all_reduce_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  write_ring_all_reduce(writer, flat_ring(call), data_block(0, call.count), 0);
  return std::move(writer).finish();
}

// (p-1) alpha + (p-1)/p n beta, n = all p blocks.
Schedule all_gather_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  const RingOf ring = flat_ring(call);
  write_ring_all_gather(
      writer, ring,
      [&](int position) { return block_of_rank(call, ring.members[static_cast<std::size_t>(position)]); }, 0);
  return std::move(writer).finish();
}

// (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma.
Schedule reduce_scatter_ring(const CollectiveCall& call) {
  StepWriter writer(call);
  const RingOf ring = flat_ring(call);
  write_ring_reduce_scatter(
      writer, ring,
      [&](int position) { return block_of_rank(call, ring.members[static_cast<std::size_t>(position)]); }, 0);
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
