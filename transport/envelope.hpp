// What sender and receiver of one message must agree on. It travels in every frame header, and the
// receiver compares it with what it expects before it touches the payload: two ranks calling
// different collectives, sizes, types or roots get a Mismatch error naming both sides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "canopy/types.hpp"

namespace canopy::transport {

struct Envelope {
  std::uint64_t comm_id = 0;  // which communicator
  std::uint64_t seq = 0;      // the collective's sequence number on that communicator
  Collective collective = Collective::PointToPoint;
  DataType dtype = DataType::UInt8;
  ReduceOp op = ReduceOp::Sum;
  std::uint8_t algorithm = 0;  // index of the algorithm in its collective's table
  std::uint32_t root = 0;      // rooted collectives; the user tag for point-to-point
  std::uint64_t count = 0;     // elements of the whole call, as the caller passed it
  std::uint32_t step = 0;      // the schedule's tag of this message within the call
  // Said about the call beyond what both sides must agree on, and never matched: the collectives layer
  // sets them (kFlagRootInStream: collectives/broadcast_stream.hpp), the transport carries them.
  std::uint8_t flags = 0;

  friend bool operator==(const Envelope&, const Envelope&) = default;
};

// The root of this broadcast called it back to back with its previous one (docs/SCHEDULES.md, *A stream of
// broadcasts*); every rank that receives the call's data learns it.
inline constexpr std::uint8_t kFlagRootInStream = 0x01;
inline constexpr std::uint8_t kKnownFlags = kFlagRootInStream;  // a frame with any other is refused

// Whether two envelopes describe the same message of the same call: everything but the flags.
inline bool same_message(Envelope a, Envelope b) {
  a.flags = b.flags = 0;
  return a == b;
}

// "all_reduce #12 (float32 sum, 1000 elements, ring, root 0, step 5)"
std::string describe(const Envelope& envelope);

// How messages name an envelope's algorithm, which travels as its index in its collective's table: the
// collectives layer, which holds the tables, registers this once (collectives/schedules/algorithms.cpp);
// until then, and for an index no table has, a message says "algorithm <index>".
using AlgorithmNamer = std::string_view (*)(Collective collective, std::uint8_t index);
void set_algorithm_namer(AlgorithmNamer namer);

}  // namespace canopy::transport
