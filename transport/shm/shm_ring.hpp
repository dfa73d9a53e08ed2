// One direction between two ranks of a host: a single-producer, single-consumer byte ring in a memfd that
// the two processes map. Positions are byte counts that only grow (a u64 never wraps in practice); a byte
// lies at its position modulo the capacity. Every frame starts on a 64-byte line (its header), its payload
// follows on the next line and is padded to a whole line, so every published position is a multiple of 64
// and a payload never splits an element at the ring's end.
//
// Segment: [identity line][producer line][consumer line] on their own 128-byte lines (no false sharing,
// even with the adjacent-line prefetcher), the data from kRingDataOffset. The producer writes only its
// line, the consumer only its own: each publishes its position with a store the other's load synchronizes
// with (seq_cst, for the sleep announcements below).
//
// Waiting: a side with nothing to do announces that it sleeps (an odd count in its own line), re-checks,
// then blocks on its doorbell (an eventfd). The other side, after it publishes, reads that count and rings
// the doorbell once per sleep. Announcing, publishing and the loads after either are seq_cst (announce, then
// check; publish, then check), so one of the two always sees the other: no wake-up is lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "transport/tcp/socket.hpp"

namespace canopy::transport {

inline constexpr std::size_t kRingLine = 64;          // frames and pieces are whole lines
inline constexpr std::size_t kRingDataOffset = 4096;  // the data starts on its own page
inline constexpr std::uint64_t kRingMinBytes = 1024;

constexpr std::uint64_t round_up_to_line(std::uint64_t bytes) {
  return (bytes + kRingLine - 1) & ~std::uint64_t{kRingLine - 1};
}

// A mapping of one ring's segment; unmapped on destruction. The memfd itself is closed once mapped (and
// sent): nothing is left of the memory once both processes have unmapped it or died.
class RingSegment {
 public:
  // A new segment of `capacity` data bytes (a power of two, >= kRingMinBytes), allocated up front
  // (fallocate: no SIGBUS later) and pre-faulted, private to this user (0600), with a random nonce in
  // its identity line. `fd` receives the memfd to pass to the consumer. Throws Error(System) saying what
  // failed.
  static RingSegment create(std::uint64_t capacity, UniqueFd& fd);
  // Maps a segment received from the producer and checks that it is what the producer announced
  // (capacity, nonce). Throws Error(System or Protocol) saying why not.
  static RingSegment attach(int fd, std::uint64_t capacity, std::uint64_t nonce);

  RingSegment(RingSegment&& other) noexcept;
  RingSegment& operator=(RingSegment&& other) noexcept;
  RingSegment(const RingSegment&) = delete;
  RingSegment& operator=(const RingSegment&) = delete;
  ~RingSegment();

  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t nonce() const { return nonce_; }
  std::byte* base() const { return base_; }
  std::size_t mapped_bytes() const { return kRingDataOffset + capacity_; }

 private:
  RingSegment(std::byte* base, std::uint64_t capacity, std::uint64_t nonce)
      : base_(base), capacity_(capacity), nonce_(nonce) {}
  std::byte* base_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t nonce_ = 0;
};

// What both ends share: positions, sleep counts, and where a position lies.
class RingEnd {
 public:
  explicit RingEnd(RingSegment segment);
  std::uint64_t capacity() const { return segment_.capacity(); }
  std::size_t mapped_bytes() const { return segment_.mapped_bytes(); }
  // The bytes from `position` to the ring's end, at most `limit`.
  std::uint64_t contiguous(std::uint64_t position, std::uint64_t limit) const;
  std::byte* at(std::uint64_t position) const { return data_ + (position & mask_); }

 protected:
  std::uint64_t* producer_position() const;
  std::uint64_t* producer_sleep() const;
  std::uint64_t* consumer_position() const;
  std::uint64_t* consumer_sleep() const;
  // Announces (odd) or ends (even) a sleep on this side's count; announcing is a seq_cst store.
  static void set_sleep(std::uint64_t* count, std::uint64_t& mine, bool asleep);
  // After publishing: whether the other side announced a sleep not yet rung for (then the caller rings).
  static bool sleeper_to_wake(const std::uint64_t* count, std::uint64_t& rung);

  RingSegment segment_;
  std::byte* data_;
  std::uint64_t mask_;
};

class RingProducer : public RingEnd {
 public:
  using RingEnd::RingEnd;
  // Bytes that may be written now (a multiple of 64), re-reading the consumer's position when fewer than
  // `wanted` are known to be free.
  std::uint64_t writable(std::uint64_t wanted);
  std::uint64_t tail() const { return tail_; }
  // Copies `bytes` at the tail (across the ring's end if need be) and advances it by `advance` >= bytes.
  void write(const std::byte* source, std::uint64_t bytes, std::uint64_t advance);
  void publish();
  bool consumer_to_wake() { return sleeper_to_wake(consumer_sleep(), rung_); }
  void announce_sleep(bool asleep) { set_sleep(producer_sleep(), sleep_, asleep); }

 private:
  std::uint64_t tail_ = 0;
  std::uint64_t published_tail_ = 0;
  std::uint64_t known_head_ = 0;
  std::uint64_t rung_ = 0;
  std::uint64_t sleep_ = 0;
};

class RingConsumer : public RingEnd {
 public:
  using RingEnd::RingEnd;
  // Bytes published and not yet consumed (a multiple of 64), re-reading the producer's position when
  // none are known.
  std::uint64_t readable();
  std::uint64_t head() const { return head_; }
  void release(std::uint64_t bytes) { head_ += bytes; }
  // Publishes the head; true when it moved.
  bool publish();
  bool producer_to_wake() { return sleeper_to_wake(producer_sleep(), rung_); }
  void announce_sleep(bool asleep) { set_sleep(consumer_sleep(), sleep_, asleep); }

 private:
  std::uint64_t head_ = 0;
  std::uint64_t published_head_ = 0;
  std::uint64_t known_tail_ = 0;
  std::uint64_t rung_ = 0;
  std::uint64_t sleep_ = 0;
};

}  // namespace canopy::transport
