// One direction between two ranks of a host, in a memfd that the two processes map: a queue of frame
// cells and a byte ring for the payloads that do not fit in a cell, with one writer (the producer) and one
// reader (the consumer).
//
// Every message takes the next cell: its 56-byte frame header, then a stamp word, then a 64-byte body. The
// producer writes the cell, then the stamp, last (seq_cst), which says what the body holds: the payload
// itself (up to kInlineBytes), where its payload stands in the byte ring, or the address of the producer's
// own buffer for the consumer to copy from (single copy, process_vm_readv). The consumer polls the stamp of
// the cell it expects, which names that cell's place in the queue (its index + 1): a stamp left from an
// earlier lap never matches, and a cell's stamp word only ever holds stamps. A small message thus costs the
// one cache line pair its cell lies on, and no shared position.
//
// The byte ring's positions are byte counts that only grow (a u64 never wraps in practice); a byte lies at
// its position modulo the capacity. A payload starts on a 64-byte line and is padded to a whole line, so a
// payload never splits an element at the ring's end. A payload written whole before its cell was stamped
// needs nothing more; a longer one streams, the producer publishing its tail as it writes.
//
// Segment: [identity][producer's tail][producer's sleep][consumer's heads][consumer's sleep], each on its own
// 128-byte line (no false sharing, even with the adjacent-line prefetcher), then the cells, then the bytes.
// Each side writes only its own lines (and the producer the cells and bytes). The sleep counts have lines of
// their own because the other side reads them after every publication: while nobody sleeps they stay in both
// caches.
//
// Waiting: a side with nothing to do announces that it sleeps (an odd count in its sleep line), re-checks,
// then blocks on its doorbell (an eventfd). The other side, after it publishes (a stamp, its tail, its
// heads), reads that count and rings the doorbell once per sleep. Announcing, publishing and the loads after
// either are seq_cst (announce, then check; publish, then check), so one of the two always sees the other:
// no wake-up is lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "transport/tcp/socket.hpp"

namespace canopy::transport {

inline constexpr std::size_t kRingLine = 64;            // payloads in the byte ring are whole lines
inline constexpr std::size_t kRingControlBytes = 4096;  // the control lines, on a page of their own
inline constexpr std::uint64_t kRingMinBytes = 1024;
inline constexpr std::size_t kCellBytes = 128;
inline constexpr std::size_t kCellBodyOffset = 64;  // the header's 56 bytes, then the stamp
inline constexpr std::size_t kInlineBytes = kCellBytes - kCellBodyOffset;

constexpr std::uint64_t round_up_to_line(std::uint64_t bytes) {
  return (bytes + kRingLine - 1) & ~std::uint64_t{kRingLine - 1};
}

// Cells per ring, one per KiB: a producer may run this many messages ahead of its consumer (ranks that
// share cores each take many calls per turn of the scheduler). Tiny rings get few, so that tests with them
// meet a full queue as often as a full ring.
constexpr std::uint64_t ring_cells(std::uint64_t capacity) {
  const std::uint64_t cells = capacity / 1024;
  return cells < 2 ? 2 : cells > 4096 ? 4096 : cells;
}

// What a ring of `capacity` payload bytes maps in all: control lines, cells and bytes.
constexpr std::uint64_t ring_segment_bytes(std::uint64_t capacity) {
  return kRingControlBytes + ring_cells(capacity) * kCellBytes + capacity;
}

// What a stamped cell's body holds.
enum class CellBody : std::uint8_t {
  Inline = 1,      // the payload (header.payload_bytes <= kInlineBytes)
  InRing = 2,      // u64: the producer's tail once it had written what it could of this payload
  SingleCopy = 3,  // u64: the address of the payload in the producer's memory
};

// A mapping of one ring's segment; unmapped on destruction. The memfd itself is closed once mapped (and
// sent): nothing is left of the memory once both processes have unmapped it or died.
class RingSegment {
 public:
  // A new segment of `capacity` payload bytes (a power of two, >= kRingMinBytes), allocated up front
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
  std::size_t mapped_bytes() const { return ring_segment_bytes(capacity_); }

 private:
  RingSegment(std::byte* base, std::uint64_t capacity, std::uint64_t nonce)
      : base_(base), capacity_(capacity), nonce_(nonce) {}
  std::byte* base_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t nonce_ = 0;
};

// What both ends share: the lines, the cells, and where a position lies.
class RingEnd {
 public:
  explicit RingEnd(RingSegment segment);
  std::uint64_t capacity() const { return segment_.capacity(); }
  std::size_t mapped_bytes() const { return segment_.mapped_bytes(); }
  // The bytes from `position` to the ring's end, at most `limit`.
  std::uint64_t contiguous(std::uint64_t position, std::uint64_t limit) const;
  std::byte* at(std::uint64_t position) const { return data_ + (position & mask_); }

  struct Lines;  // the control lines (shm_ring.cpp)

 protected:
  Lines& lines() const;
  std::byte* cell(std::uint64_t index) const { return cells_ + (index & cell_mask_) * kCellBytes; }
  static std::uint64_t* stamp_of(std::byte* cell);
  // Announces (odd) or ends (even) a sleep on this side's count; announcing is a seq_cst store.
  static void set_sleep(std::uint64_t* count, std::uint64_t& mine, bool asleep);
  // Stores `value` into the shared `word` (seq_cst) unless it is what was published last; true when stored.
  static bool publish_word(std::uint64_t* word, std::uint64_t value, std::uint64_t& published);
  // After publishing: whether the other side announced a sleep not yet rung for (then the caller rings).
  static bool sleeper_to_wake(const std::uint64_t* count, std::uint64_t& rung);

  RingSegment segment_;
  std::byte* cells_;
  std::byte* data_;
  std::uint64_t cell_count_;
  std::uint64_t cell_mask_;
  std::uint64_t mask_;
};

class RingProducer : public RingEnd {
 public:
  using RingEnd::RingEnd;

  // Whether the next cell is free, re-reading the consumer's head when it seems not to be.
  bool cell_free();
  // The next cell: the header goes at its start, the body at kCellBodyOffset.
  std::byte* next_cell() const { return cell(next_cell_); }
  // Makes the next cell visible to the consumer, saying what its body holds (a seq_cst store).
  void stamp(CellBody body);

  // Bytes that may be written now (a multiple of 64), re-reading the consumer's position when fewer than
  // `wanted` are known to be free.
  std::uint64_t writable(std::uint64_t wanted);
  std::uint64_t tail() const { return tail_; }
  // Copies `bytes` at the tail (across the ring's end if need be) and advances it by `advance` >= bytes.
  void write(const std::byte* source, std::uint64_t bytes, std::uint64_t advance);
  // Publishes the tail for a payload that streams (one whose cell was stamped before it was whole).
  void publish_tail();

  // How many single-copy payloads the consumer has finished reading.
  std::uint64_t copied() const;

  bool consumer_to_wake();
  void announce_sleep(bool asleep);

 private:
  std::uint64_t next_cell_ = 0;
  std::uint64_t known_cell_head_ = 0;
  std::uint64_t tail_ = 0;
  std::uint64_t published_tail_ = 0;
  std::uint64_t known_head_ = 0;
  std::uint64_t rung_ = 0;
  std::uint64_t sleep_ = 0;
};

class RingConsumer : public RingEnd {
 public:
  using RingEnd::RingEnd;

  // The expected cell once the producer stamped it (its header at the start, the body at
  // kCellBodyOffset), with what its body holds; null when it is not there yet.
  const std::byte* ready_cell(CellBody& body) const;
  // Done with the cell ready_cell() returned (publish() tells the producer).
  void release_cell() { ++cell_head_; }

  // The producer's tail as an InRing cell gave it: the bytes up to there are written.
  void note_tail(std::uint64_t tail) { known_tail_ = tail > known_tail_ ? tail : known_tail_; }
  // Payload bytes written and not yet consumed (a multiple of 64, except for a streaming payload's
  // last piece), re-reading the producer's tail when none are known.
  std::uint64_t readable();
  std::uint64_t head() const { return head_; }
  void release(std::uint64_t bytes) { head_ += bytes; }

  // One more single-copy payload read.
  void count_copied() { ++copied_; }

  // Publishes the heads and the copy count; true when one of them moved.
  bool publish();
  bool producer_to_wake();
  void announce_sleep(bool asleep);

 private:
  std::uint64_t cell_head_ = 0;
  std::uint64_t head_ = 0;
  std::uint64_t copied_ = 0;
  std::uint64_t published_cell_head_ = 0;
  std::uint64_t published_head_ = 0;
  std::uint64_t published_copied_ = 0;
  std::uint64_t known_tail_ = 0;
  std::uint64_t rung_ = 0;
  std::uint64_t sleep_ = 0;
};

}  // namespace canopy::transport
