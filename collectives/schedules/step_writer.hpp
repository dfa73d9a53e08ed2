// What every schedule builder writes with: a rank's steps in program order, with their
// dependencies derived from the memory they touch, so that an algorithm reads like its pseudocode
// ("receive chunk c from the parent, send it to each child") and the deps are right by construction.
//
// A step depends on every earlier step of the rank whose access conflicts with its own: it reads
// what an earlier step writes (read after write), or writes what an earlier step reads or writes
// (write after read / write after write). Any execution that respects these deps computes what the
// sequential program computes, however the executor overlaps the steps; pipelining follows by
// itself: a send of chunk c waits for the receive of chunk c only, not of the whole buffer.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <utility>
#include <vector>

#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

using StepIndex = std::uint32_t;

// The tag of one message: the algorithm's round (or phase) in the high 12 bits, the chunk in the low
// 20 (both wrap around; the tag is a check that sender and receiver agree, not an address).
constexpr std::uint32_t message_tag(std::uint32_t round, std::uint64_t chunk) {
  return (round << 20) | static_cast<std::uint32_t>(chunk & 0xFFFFF);
}

// [offset, offset + count) of the Data buffer.
constexpr Block data_block(std::uint64_t offset, std::uint64_t count) {
  return Block{Buffer::Data, offset, count};
}

// Part `index` of `parts` near-equal parts of [0, total): the first total % parts parts hold one
// element more. Parts may be empty when total < parts.
Block part_of(std::uint64_t total, int parts, int index);

// [offset, offset + count) of the caller's input, where it is a buffer of its own (an all-to-all's
// blocks, a scatter root's, a gather's own block away from the root): see CollectiveCall.
constexpr Block input_block(std::uint64_t offset, std::uint64_t count) {
  return Block{Buffer::Input, offset, count};
}

// Parts [first, last) of the same partition, as one contiguous block.
Block parts_of(std::uint64_t total, int parts, int first, int last);

// Number of chunks of at most chunk_count elements that `block` splits into (0 for an empty block).
std::uint64_t chunk_total(const Block& block, std::uint64_t chunk_count);

// Chunk `index` of `block` (an empty block past the end).
Block chunk_of(const Block& block, std::uint64_t chunk_count, std::uint64_t index);

// Who last wrote, and who read since, each range of one buffer.
class BufferHazards {
 public:
  // Adds to `deps` the steps an access of [offset, offset + count) must wait for, then records it.
  void read(std::uint64_t offset, std::uint64_t count, StepIndex step, std::vector<StepIndex>& deps);
  void write(std::uint64_t offset, std::uint64_t count, StepIndex step, std::vector<StepIndex>& deps);

 private:
  struct Segment {
    std::uint64_t end = 0;
    std::int64_t writer = -1;
    std::vector<StepIndex> readers;  // since the last write
  };
  // Splits the segments at `offset` and `end` and returns the first segment of [offset, end).
  std::map<std::uint64_t, Segment>::iterator split(std::uint64_t offset, std::uint64_t end);

  std::map<std::uint64_t, Segment> segments_;  // keyed by start; untouched ranges are absent
};

// Which ranges of Data a rank's program has written so far, in program order. Out of place, the
// ranges not written yet still hold the input only in the Input buffer.
class WrittenRanges {
 public:
  void add(std::uint64_t offset, std::uint64_t count);
  // The maximal sub-ranges of [offset, offset + count) not written yet, as (offset, count), in order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> missing(std::uint64_t offset,
                                                               std::uint64_t count) const;

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;  // start -> end; disjoint, never adjacent
};

// Builders write every algorithm as if it were in place: Data holds the input when the call starts.
// For an out-of-place call the writer turns that program into one that reads the Input buffer
// instead, without copying it: a read of Data the program has not written yet (a send, a copy, the
// accumulator of a RecvReduce) reads the same elements of Input, so a rank's first send of a block
// goes straight from the caller's input and its first reduce is out = input (op) incoming. Only a read
// that straddles written and unwritten elements copies the unwritten part of Input into Data first,
// and finish() copies whatever part of the result the algorithm never wrote (a broadcast's root, an
// all-gather's own block).
class StepWriter {
 public:
  // Staging is a pool of `staging_slots` regions of min(chunk_count, data_count) elements used in
  // turn, so it stays bounded however many chunks the call has; reusing a slot waits (through the
  // hazards above) for the step that used it last.
  explicit StepWriter(const CollectiveCall& call, int staging_slots = 4);

  const CollectiveCall& call() const { return call_; }
  int rank() const { return call_.rank; }
  int size() const { return call_.size; }
  std::uint64_t chunk_count() const { return call_.chunk_count; }

  // One step each. `after` adds deps the memory cannot express (the rounds of a zero-byte barrier).
  StepIndex send(int peer, Block src, std::uint32_t tag, std::initializer_list<StepIndex> after = {});
  StepIndex recv(int peer, Block dst, std::uint32_t tag, std::initializer_list<StepIndex> after = {});
  StepIndex recv_reduce(int peer, Block dst, std::uint32_t tag, bool incoming_first);
  StepIndex copy(Block src, Block dst);

  // A region of Staging of `count` elements for this schedule alone (a gather's subtree, a Bruck
  // all-to-all's rotated blocks), apart from the slots RecvReduce lands in (which follow it, so every
  // scratch() comes before the first recv_reduce()). Steps may receive and copy into it; the hazards
  // order its reuse as they order Data's.
  Block scratch(std::uint64_t count);

  // The whole block, chunk by chunk; chunk c carries message_tag(round, c). Nothing for an empty block.
  void send_chunks(int peer, Block src, std::uint32_t round);
  void recv_chunks(int peer, Block dst, std::uint32_t round);
  void recv_reduce_chunks(int peer, Block dst, std::uint32_t round, bool incoming_first);

  // Send `out` to `to` while receiving `in` from `from`, chunk by chunk interleaved (send chunk c,
  // receive chunk c, ...) so that each chunk received can be forwarded before the next arrives. Chunk c
  // carries message_tag(round, first_chunk + c).
  void exchange_chunks(int to, Block out, int from, Block in, std::uint32_t round,
                       std::uint64_t first_chunk = 0);
  // The same, reducing what arrives into `in`.
  void exchange_reduce_chunks(int to, Block out, int from, Block in, std::uint32_t round, bool incoming_first,
                              std::uint64_t first_chunk = 0);

  Schedule finish() &&;

 private:
  StepIndex add(Step step);
  void track(const Block& block, bool writes, StepIndex index, std::vector<StepIndex>& deps);
  // Where the current value of Data `block` lives: `block` itself, or (out of place, when none of it
  // was written yet) the same elements of Input; copies Input into Data where it must.
  Block current(const Block& block);
  void copy_input(std::uint64_t offset, std::uint64_t count);
  // Out of place: copies what the result needs from Input and the program never wrote.
  void copy_unwritten_result();

  CollectiveCall call_;
  Schedule schedule_;
  BufferHazards data_hazards_;
  BufferHazards staging_hazards_;
  WrittenRanges written_;         // out of place only
  std::uint64_t slot_count_ = 0;  // elements per staging slot
  int staging_slots_ = 0;
  std::uint64_t recv_reduces_ = 0;
  std::uint64_t scratch_end_ = 0;  // elements of Staging that scratch() handed out
};

}  // namespace canopy::collectives
