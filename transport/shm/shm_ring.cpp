#include "transport/shm/shm_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "common/error.hpp"
#include "transport/frame.hpp"
#include "transport/shm/shared_memory_file.hpp"

namespace canopy::transport {
namespace {

constexpr std::uint64_t kRingMagic = 0x474E4952594E4143;  // "CANYRING"
constexpr std::uint64_t kRingVersion = 2;

// A stamp names its cell's place in the queue (index + 1, never 0) and what the body holds.
constexpr std::uint64_t stamp_for(std::uint64_t index, CellBody body) {
  return ((index + 1) << 2) | static_cast<std::uint64_t>(body);
}

std::atomic_ref<std::uint64_t> shared(std::uint64_t* word) {
  return std::atomic_ref<std::uint64_t>(*word);
}

}  // namespace

// The control lines at the segment's start; each side writes only its own.
struct alignas(128) IdentityLine {
  std::uint64_t magic;
  std::uint64_t version;
  std::uint64_t capacity;
  std::uint64_t nonce;
  std::uint64_t cells;
};
struct alignas(128) ProducerLine {
  std::uint64_t tail;
};
struct alignas(128) ConsumerLine {
  std::uint64_t cell_head;
  std::uint64_t head;
  std::uint64_t copied;
};
struct alignas(128) SleepLine {
  std::uint64_t count;
};
struct RingEnd::Lines {
  IdentityLine identity;
  ProducerLine producer;
  SleepLine producer_sleep;
  ConsumerLine consumer;
  SleepLine consumer_sleep;
};
static_assert(sizeof(RingEnd::Lines) <= kRingControlBytes);
static_assert(kFrameHeaderSize + sizeof(std::uint64_t) == kCellBodyOffset, "the stamp follows the header");
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "positions are shared across processes");

namespace {

RingEnd::Lines* lines_of(std::byte* base) {
  return reinterpret_cast<RingEnd::Lines*>(base);
}

}  // namespace

RingSegment RingSegment::create(std::uint64_t capacity, UniqueFd& fd) {
  if (capacity < kRingMinBytes || (capacity & (capacity - 1)) != 0)
    fail(ErrorCode::InvalidArgument, "shared memory: a ring of {} bytes (a power of two >= {} is needed)",
         capacity, kRingMinBytes);
  const std::size_t bytes = ring_segment_bytes(capacity);
  fd = create_shared_memory("canopy-ring", bytes, "a ring");
  std::byte* base = map_shared_memory(fd.get(), bytes);
  std::random_device entropy;
  const std::uint64_t nonce = (std::uint64_t{entropy()} << 32) ^ entropy();
  lines_of(base)->identity = IdentityLine{kRingMagic, kRingVersion, capacity, nonce, ring_cells(capacity)};
  return RingSegment(base, capacity, nonce);
}

RingSegment RingSegment::attach(int fd, std::uint64_t capacity, std::uint64_t nonce) {
  if (capacity < kRingMinBytes || (capacity & (capacity - 1)) != 0 || capacity > (std::uint64_t{1} << 40))
    fail(ErrorCode::Protocol, "shared memory: a ring of {} bytes was offered", capacity);
  const std::size_t bytes = ring_segment_bytes(capacity);
  check_offered_memory(fd, bytes, "ring");
  std::byte* base = map_shared_memory(fd, bytes);
  RingSegment segment(base, capacity, nonce);
  const IdentityLine& identity = lines_of(base)->identity;
  if (identity.magic != kRingMagic || identity.version != kRingVersion || identity.capacity != capacity ||
      identity.nonce != nonce || identity.cells != ring_cells(capacity))
    fail(ErrorCode::Protocol,
         "shared memory: the offered ring is not the one announced (its identity differs)");
  return segment;
}

RingSegment::RingSegment(RingSegment&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), capacity_(other.capacity_), nonce_(other.nonce_) {}

RingSegment& RingSegment::operator=(RingSegment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, mapped_bytes());
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = other.capacity_;
    nonce_ = other.nonce_;
  }
  return *this;
}

RingSegment::~RingSegment() {
  if (base_ != nullptr) ::munmap(base_, mapped_bytes());
}

RingEnd::RingEnd(RingSegment segment)
    : segment_(std::move(segment)),
      cells_(segment_.base() + kRingControlBytes),
      cell_count_(ring_cells(segment_.capacity())),
      cell_mask_(cell_count_ - 1),
      mask_(segment_.capacity() - 1) {
  data_ = cells_ + cell_count_ * kCellBytes;
}

std::uint64_t RingEnd::contiguous(std::uint64_t position, std::uint64_t limit) const {
  return std::min(limit, capacity() - (position & mask_));
}

RingEnd::Lines& RingEnd::lines() const {
  return *lines_of(segment_.base());
}

std::uint64_t* RingEnd::stamp_of(std::byte* cell) {
  return reinterpret_cast<std::uint64_t*>(cell + kFrameHeaderSize);
}

void RingEnd::set_sleep(std::uint64_t* count, std::uint64_t& mine, bool asleep) {
  if (((mine & 1) != 0) == asleep) return;
  // Announcing is seq_cst, as are the re-check's loads and the other side's publication and its load of
  // this count: in their single order one of the two sides sees the other (no fences: TSan models none).
  shared(count).store(++mine, asleep ? std::memory_order_seq_cst : std::memory_order_relaxed);
}

bool RingEnd::publish_word(std::uint64_t* word, std::uint64_t value, std::uint64_t& published) {
  if (value == published) return false;
  published = value;
  shared(word).store(value, std::memory_order_seq_cst);
  return true;
}

bool RingEnd::sleeper_to_wake(const std::uint64_t* count, std::uint64_t& rung) {
  const std::uint64_t sleep = shared(const_cast<std::uint64_t*>(count)).load(std::memory_order_seq_cst);
  if ((sleep & 1) == 0 || sleep == rung) return false;
  rung = sleep;
  return true;
}

bool RingProducer::cell_free() {
  if (next_cell_ - known_cell_head_ < cell_count_) return true;
  known_cell_head_ = shared(&lines().consumer.cell_head).load(std::memory_order_seq_cst);
  return next_cell_ - known_cell_head_ < cell_count_;
}

void RingProducer::stamp(CellBody body) {
  shared(stamp_of(next_cell())).store(stamp_for(next_cell_, body), std::memory_order_seq_cst);
  ++next_cell_;
  published_tail_ = tail_;  // the stamp covers what was written before it
}

std::uint64_t RingProducer::writable(std::uint64_t wanted) {
  std::uint64_t free = capacity() - (tail_ - known_head_);
  if (free < wanted) {
    known_head_ = shared(&lines().consumer.head).load(std::memory_order_seq_cst);
    free = capacity() - (tail_ - known_head_);
  }
  return free;
}

void RingProducer::write(const std::byte* source, std::uint64_t bytes, std::uint64_t advance) {
  const std::uint64_t first = contiguous(tail_, bytes);
  std::memcpy(at(tail_), source, first);
  if (first < bytes) std::memcpy(at(tail_ + first), source + first, bytes - first);
  tail_ += advance;
}

void RingProducer::publish_tail() {
  publish_word(&lines().producer.tail, tail_, published_tail_);
}

std::uint64_t RingProducer::copied() const {
  return shared(&lines().consumer.copied).load(std::memory_order_seq_cst);
}

bool RingProducer::consumer_to_wake() {
  return sleeper_to_wake(&lines().consumer_sleep.count, rung_);
}

void RingProducer::announce_sleep(bool asleep) {
  set_sleep(&lines().producer_sleep.count, sleep_, asleep);
}

const std::byte* RingConsumer::ready_cell(CellBody& body) const {
  std::byte* expected = cell(cell_head_);
  const std::uint64_t stamp = shared(stamp_of(expected)).load(std::memory_order_seq_cst);
  if ((stamp >> 2) != cell_head_ + 1) return nullptr;
  body = static_cast<CellBody>(stamp & 3);
  return expected;
}

std::uint64_t RingConsumer::readable() {
  if (known_tail_ <= head_) {
    const std::uint64_t tail = shared(&lines().producer.tail).load(std::memory_order_seq_cst);
    note_tail(tail);
  }
  return known_tail_ > head_ ? known_tail_ - head_ : 0;
}

bool RingConsumer::publish() {
  ConsumerLine& mine = lines().consumer;
  const bool cells = publish_word(&mine.cell_head, cell_head_, published_cell_head_);
  const bool bytes = publish_word(&mine.head, head_, published_head_);
  const bool copies = publish_word(&mine.copied, copied_, published_copied_);
  return cells || bytes || copies;
}

bool RingConsumer::producer_to_wake() {
  return sleeper_to_wake(&lines().producer_sleep.count, rung_);
}

void RingConsumer::announce_sleep(bool asleep) {
  set_sleep(&lines().consumer_sleep.count, sleep_, asleep);
}

}  // namespace canopy::transport
