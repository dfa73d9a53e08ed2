// An algorithm is data: a pure function from (rank, world size, element count, root, chunking) to
// the ordered steps this rank performs. The executor runs a schedule over a transport, the simulator
// runs the schedules of all ranks on plain memory (checking them and predicting their time), and the
// tracer draws them. See docs/SCHEDULES.md.
#pragma once

#include <cstdint>
#include <vector>

#include "canopy/types.hpp"

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
struct CollectiveCall {
  Collective collective = Collective::AllReduce;
  int rank = 0;
  int size = 1;
  // Broadcast, Reduce, AllReduce: elements of the buffer. AllGather, ReduceScatter: elements of one
  // rank's block (the Data buffer then holds size * count elements, block r at offset r * count).
  std::uint64_t count = 0;
  int root = 0;                         // Broadcast, Reduce
  std::uint64_t chunk_count = 1 << 18;  // pipelining granularity in elements (>= 1)
  // In place, Data holds the caller's input when the call starts. Out of place, the input is the
  // separate, read-only Input buffer, and Data starts as garbage: the schedule's first send and first
  // reduce of each block read Input directly, so nothing copies the input into Data first.
  bool in_place = true;

  bool blocked() const {
    return collective == Collective::AllGather || collective == Collective::ReduceScatter;
  }

  // Elements of the Data buffer the schedule works on.
  std::uint64_t data_count() const { return blocked() ? count * static_cast<std::uint64_t>(size) : count; }

  // The range of Data that the caller's input stands for: an all-gather's input is this rank's
  // block; every other collective's input covers all of Data. Input element i is Data element
  // input_offset() + i of an in-place call.
  std::uint64_t input_offset() const {
    return collective == Collective::AllGather ? static_cast<std::uint64_t>(rank) * count : 0;
  }
  std::uint64_t input_count() const { return collective == Collective::AllGather ? count : data_count(); }
};

struct Schedule {
  std::vector<Step> steps;
  std::uint64_t staging_count = 0;  // elements of Staging the steps use
};

}  // namespace canopy::collectives
