// An algorithm is data: a pure function from (rank, world size, element count, root, chunking) to
// the ordered steps this rank performs. The executor runs a schedule over a transport, the simulator
// runs the schedules of all ranks on plain memory (checking them and predicting their time), and the
// tracer draws them. See docs/SCHEDULES.md.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "canopy/types.hpp"
#include "collectives/schedules/host_layout.hpp"

namespace canopy::collectives {

// The memory a step reads or writes. Data is the call's working buffer, where the result ends (the
// user's output buffer; see CollectiveCall::data_count); Staging is scratch the executor provides;
// Input is the caller's input when it is a separate buffer (an out-of-place call, see
// CollectiveCall::in_place): read-only, it stands for CollectiveCall::input_region() of Data.
enum class Buffer : std::uint8_t { Data, Staging, Input };

// A run of elements in one buffer.
struct Block {
  Buffer buffer = Buffer::Data;
  std::uint64_t offset = 0;  // elements
  std::uint64_t count = 0;   // elements
};

enum class StepKind : std::uint8_t {
  Send,        // send `src` to `peer`
  Recv,        // receive from `peer` into `dst`
  RecvReduce,  // receive from `peer` into `staging`, then dst = src (op) staging
  Copy,        // copy `src` into `dst` locally
};

struct Step {
  StepKind kind = StepKind::Send;
  int peer = -1;
  Block src;      // Send, Copy; RecvReduce: the accumulator's current value, dst itself or an Input block
  Block dst;      // Recv, RecvReduce, Copy
  Block staging;  // RecvReduce: where the message lands before it is reduced into dst
  // RecvReduce: compute dst = staging (op) src instead of src (op) staging. Algorithms set it so that
  // every rank evaluates the same expression (the operand covering lower ranks on the left): with
  // min/max of -0/+0 or NaN, or any non-commutative rounding, the replicas stay bit-identical.
  bool incoming_first = false;
  // Identifies the message between one sender and one receiver within one call; sender and receiver
  // use the same tag (it travels as Envelope::step and is checked on arrival).
  std::uint32_t tag = 0;
  // Indices of earlier steps of this rank that must complete before this one starts.
  std::vector<std::uint32_t> deps;
};

// One collective call as seen by one rank.
//
// The buffers, per collective (count is the `count` field; P the size):
//   collective                 Data (where the result ends)    Input (the caller's input)
//   broadcast, reduce,         count                           the whole of Data
//     all-reduce
//   all-gather                 P * count, block r from rank r  block `rank` of Data
//   reduce-scatter             P * count (partial sums)        the whole of Data
//   gather                     root: P * count; others: none   count; at the root block `root` of Data
//   scatter                    count                           root: P * count; others: none
//   all-to-all                 P * count, block j from rank j  P * count, block j for rank j
//   all-to-all-v               sum of recv_counts              sum of send_counts
// Where the input is a region of Data (input_in_data()), an in-place call has it there already, and
// an out-of-place call has it in the separate, read-only Input buffer. Elsewhere Input is always
// separate (in_place is false), except at the root of an in-place scatter, whose Data already is its
// own block of Input.
struct CollectiveCall {
  Collective collective = Collective::AllReduce;
  int rank = 0;
  int size = 1;
  // Elements of the buffer, or of one rank's block (all-gather, reduce-scatter, gather, scatter,
  // all-to-all). Unused by all-to-all-v.
  std::uint64_t count = 0;
  int root = 0;                         // broadcast, reduce, gather, scatter
  std::uint64_t chunk_count = 1 << 18;  // pipelining granularity in elements (>= 1)
  // In place, Data holds the caller's input when the call starts. Out of place, the input is the
  // separate, read-only Input buffer, and Data starts as garbage: the schedule's first send and first
  // reduce of each block read Input directly, so nothing copies the input into Data first.
  bool in_place = true;
  // all-to-all-v: the elements this rank sends to and receives from each rank (size entries each).
  std::vector<std::uint64_t> send_counts{};
  std::vector<std::uint64_t> recv_counts{};
  // Which host each rank is on (the communicator's layout, shared by all its calls: copying a call copies
  // a pointer). Null: every rank on a host of its own. Host-aware algorithms order their rings and
  // chains by it, two-level ones build their levels from it, and the simulator times messages within
  // and between hosts by it.
  std::shared_ptr<const HostLayout> hosts{};
  // The payload of each rank's cell where the group's transport has host cells
  // (transport/shm/host_cells.hpp); 0: none. A one-shot algorithm's call that fits runs through them instead
  // of its schedule.
  std::uint64_t cell_bytes = 0;

  const HostLayout& layout() const {
    static const HostLayout kEveryRankAlone;
    return hosts ? *hosts : kEveryRankAlone;
  }

  bool blocked() const {
    return collective == Collective::AllGather || collective == Collective::ReduceScatter ||
           collective == Collective::AllToAll;
  }
  bool rooted() const {
    return collective == Collective::Broadcast || collective == Collective::Reduce ||
           collective == Collective::Gather || collective == Collective::Scatter;
  }

  // Whether a one-shot algorithm's call goes through the host's cells: its payload fits one (a barrier's is
  // none).
  bool through_cells(std::size_t element_size) const {
    if (cell_bytes == 0) return false;
    return collective == Collective::Barrier || (count > 0 && count <= cell_bytes / element_size);
  }

  // Elements of the Data buffer the schedule works on.
  std::uint64_t data_count() const {
    if (blocked()) return count * static_cast<std::uint64_t>(size);
    if (collective == Collective::AllToAllV) return total(recv_counts);
    if (collective == Collective::Gather) return rank == root ? count * static_cast<std::uint64_t>(size) : 0;
    return count;
  }

  // Elements of the caller's input.
  std::uint64_t input_count() const {
    switch (collective) {
      case Collective::AllGather:
      case Collective::Gather:
        return count;
      case Collective::Scatter:
        return rank == root ? count * static_cast<std::uint64_t>(size) : 0;
      case Collective::AllToAllV:
        return total(send_counts);
      default:
        return data_count();
    }
  }

  // Whether the input stands for a region of Data: [input_offset(), input_offset() + input_count()).
  bool input_in_data() const {
    switch (collective) {
      case Collective::AllToAll:
      case Collective::AllToAllV:
      case Collective::Scatter:
        return false;
      case Collective::Gather:
        return rank == root;
      default:
        return true;
    }
  }
  // Input element i is Data element input_offset() + i of an in-place call.
  std::uint64_t input_offset() const {
    if (collective == Collective::AllGather) return static_cast<std::uint64_t>(rank) * count;
    if (collective == Collective::Gather) return static_cast<std::uint64_t>(root) * count;
    return 0;
  }

 private:
  static std::uint64_t total(const std::vector<std::uint64_t>& counts) {
    std::uint64_t sum = 0;
    for (std::uint64_t c : counts) sum += c;
    return sum;
  }
};

struct Schedule {
  std::vector<Step> steps;
  std::uint64_t staging_count = 0;  // elements of Staging the steps use
};

}  // namespace canopy::collectives
