// All-to-all: block j of rank r's Input lands in block r of rank j's Data. All-to-all-v: the same
// with a count per pair (blocks back to back in rank order).
#include <numeric>

#include "collectives/schedules/builders.hpp"

namespace canopy::collectives {
namespace {

// Where each rank's block starts in a buffer of blocks laid back to back.
std::vector<std::uint64_t> offsets_of(const std::vector<std::uint64_t>& counts) {
  std::vector<std::uint64_t> offsets(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), offsets.begin(), std::uint64_t{0});
  return offsets;
}

}  // namespace

// Round k = 1..p-1: send block r+k to rank r+k while receiving block r-k from rank r-k. Every rank
// talks to a different peer in each round, so no rank's link is the meeting point of the others;
// (p-1)(alpha + n/p beta) per rank for n bytes of blocks.
Schedule all_to_all_pairwise(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const std::uint64_t n = call.count;
  auto block = [n](int j) { return static_cast<std::uint64_t>(j) * n; };
  writer.copy(input_block(block(r), n), data_block(block(r), n));
  for (int k = 1; k < p; ++k) {
    const int to = (r + k) % p;
    const int from = (r - k + p) % p;
    writer.exchange_chunks(to, input_block(block(to), n), from, data_block(block(from), n),
                           static_cast<std::uint32_t>(k));
  }
  return std::move(writer).finish();
}

// Bruck's algorithm: ceil(lg p) rounds instead of p - 1, each moving about half the blocks, which wins
// where alpha outweighs the bytes (small blocks). Rotate so that local block i is for rank r+i; in the
// round of distance d = 2^k, send every local block whose index has bit k set to rank r+d (packed into
// one message) and take the same indices from rank r-d; a block at index i so travels i ranks in all.
// Local block i then came from rank r-i: rotate back.
// ceil(lg p)(alpha + n/2 beta) + copies of about (lg p + 2) n.
Schedule all_to_all_bruck(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const std::uint64_t n = call.count;
  const auto up = static_cast<std::uint64_t>(p);
  // Local blocks 1..p-1 (block 0 is this rank's own); a round moves at most p/2 of them.
  const Block local = writer.scratch((up - 1) * n);
  const Block outgoing = writer.scratch(up / 2 * n);
  const Block incoming = writer.scratch(up / 2 * n);
  auto local_block = [&](int i) {
    return Block{Buffer::Staging, local.offset + static_cast<std::uint64_t>(i - 1) * n, n};
  };
  auto packed = [&](const Block& area, int j) {
    return Block{Buffer::Staging, area.offset + static_cast<std::uint64_t>(j) * n, n};
  };

  // Block 0 never moves: it goes straight to this rank's own result.
  writer.copy(input_block(static_cast<std::uint64_t>(r) * n, n),
              data_block(static_cast<std::uint64_t>(r) * n, n));
  for (int i = 1; i < p; ++i)
    writer.copy(input_block(static_cast<std::uint64_t>((r + i) % p) * n, n), local_block(i));

  std::uint32_t round = 0;
  for (int d = 1; d < p; d *= 2, ++round) {
    int moved = 0;
    for (int i = 1; i < p; ++i)
      if (i & d) writer.copy(local_block(i), packed(outgoing, moved++));
    const Block out{Buffer::Staging, outgoing.offset, static_cast<std::uint64_t>(moved) * n};
    const Block in{Buffer::Staging, incoming.offset, static_cast<std::uint64_t>(moved) * n};
    writer.exchange_chunks((r + d) % p, out, (r - d + p) % p, in, round);
    int taken = 0;
    for (int i = 1; i < p; ++i)
      if (i & d) writer.copy(packed(incoming, taken++), local_block(i));
  }
  for (int i = 1; i < p; ++i)
    writer.copy(local_block(i), data_block(static_cast<std::uint64_t>((r - i + p) % p) * n, n));
  return std::move(writer).finish();
}

// As all_to_all_pairwise, with a count per pair. Every pair exchanges one message even when its count
// is zero: a rank whose counts disagree with its peer's then meets a size mismatch, not a silent wait.
Schedule all_to_all_v_pairwise(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const int r = call.rank;
  const std::vector<std::uint64_t> send_offsets = offsets_of(call.send_counts);
  const std::vector<std::uint64_t> recv_offsets = offsets_of(call.recv_counts);
  auto outgoing = [&](int j) { return input_block(send_offsets[j], call.send_counts[j]); };
  auto incoming = [&](int j) { return data_block(recv_offsets[j], call.recv_counts[j]); };
  writer.copy(outgoing(r), incoming(r));
  for (int k = 1; k < p; ++k) {
    const int to = (r + k) % p;
    const int from = (r - k + p) % p;
    const auto tag = static_cast<std::uint32_t>(k);
    if (call.send_counts[to] == 0) writer.send(to, outgoing(to), message_tag(tag, 0));
    if (call.recv_counts[from] == 0) writer.recv(from, incoming(from), message_tag(tag, 0));
    writer.exchange_chunks(to, outgoing(to), from, incoming(from), tag);
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
