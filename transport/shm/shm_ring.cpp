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

namespace canopy::transport {
namespace {

constexpr std::uint64_t kRingMagic = 0x474E4952594E4143;  // "CANYRING"
constexpr std::uint64_t kRingVersion = 1;

// The control lines at the segment's start; each side writes only its own.
struct alignas(128) IdentityLine {
  std::uint64_t magic;
  std::uint64_t version;
  std::uint64_t capacity;
  std::uint64_t nonce;
};
struct alignas(128) PositionLine {
  std::uint64_t position;
  std::uint64_t sleep;
};
struct RingControl {
  IdentityLine identity;
  PositionLine producer;
  PositionLine consumer;
};
static_assert(sizeof(RingControl) <= kRingDataOffset);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "positions are shared across processes");

RingControl* control_of(std::byte* base) {
  return reinterpret_cast<RingControl*>(base);
}

std::atomic_ref<std::uint64_t> shared(std::uint64_t* word) {
  return std::atomic_ref<std::uint64_t>(*word);
}

std::byte* map_segment(int fd, std::size_t bytes) {
  // MAP_POPULATE: every page is faulted in now, not at the first message (a fresh page costs ~12 us here).
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) fail_errno(fmt::format("shared memory: mmap of {} bytes", bytes));
  // A fork() of this process (a trainer's data loader) must not inherit the ring.
  ::madvise(base, bytes, MADV_DONTFORK);
  return static_cast<std::byte*>(base);
}

}  // namespace

RingSegment RingSegment::create(std::uint64_t capacity, UniqueFd& fd) {
  if (capacity < kRingMinBytes || (capacity & (capacity - 1)) != 0)
    fail(ErrorCode::InvalidArgument, "shared memory: a ring of {} bytes (a power of two >= {} is needed)",
         capacity, kRingMinBytes);
  const std::size_t bytes = kRingDataOffset + capacity;
  fd = UniqueFd(::memfd_create("canopy-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) fail_errno("shared memory: memfd_create");
  if (::fchmod(fd.get(), 0600) != 0) fail_errno("shared memory: fchmod 0600");
  // fallocate, not ftruncate: a ring the kernel cannot back fails here, with a message, rather than with
  // SIGBUS at the first write into an unbacked page.
  if (int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); error != 0)
    fail(ErrorCode::System, "shared memory: allocating a {}-byte ring: {}", bytes, std::strerror(error));
  // The size is fixed from now on: a consumer never maps more than there is.
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  std::byte* base = map_segment(fd.get(), bytes);
  std::random_device entropy;
  const std::uint64_t nonce = (std::uint64_t{entropy()} << 32) ^ entropy();
  RingControl* control = control_of(base);
  control->identity = IdentityLine{kRingMagic, kRingVersion, capacity, nonce};
  return RingSegment(base, capacity, nonce);
}

RingSegment RingSegment::attach(int fd, std::uint64_t capacity, std::uint64_t nonce) {
  if (capacity < kRingMinBytes || (capacity & (capacity - 1)) != 0 || capacity > (std::uint64_t{1} << 40))
    fail(ErrorCode::Protocol, "shared memory: a ring of {} bytes was offered", capacity);
  const std::size_t bytes = kRingDataOffset + capacity;
  struct stat status {};
  if (::fstat(fd, &status) != 0) fail_errno("shared memory: fstat of the offered ring");
  if (!S_ISREG(status.st_mode) || static_cast<std::uint64_t>(status.st_size) != bytes)
    fail(ErrorCode::Protocol, "shared memory: the offered ring has {} bytes, not {}", status.st_size, bytes);
  if (status.st_uid != ::getuid() || (status.st_mode & 077) != 0)
    fail(ErrorCode::Protocol,
         "shared memory: the offered ring is not private to this user (owner {}, mode {:o})", status.st_uid,
         status.st_mode & 0777);
  std::byte* base = map_segment(fd, bytes);
  RingSegment segment(base, capacity, nonce);
  const IdentityLine& identity = control_of(base)->identity;
  if (identity.magic != kRingMagic || identity.version != kRingVersion || identity.capacity != capacity ||
      identity.nonce != nonce)
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
      data_(segment_.base() + kRingDataOffset),
      mask_(segment_.capacity() - 1) {}

std::uint64_t RingEnd::contiguous(std::uint64_t position, std::uint64_t limit) const {
  return std::min(limit, capacity() - (position & mask_));
}

std::uint64_t* RingEnd::producer_position() const {
  return &control_of(segment_.base())->producer.position;
}
std::uint64_t* RingEnd::producer_sleep() const {
  return &control_of(segment_.base())->producer.sleep;
}
std::uint64_t* RingEnd::consumer_position() const {
  return &control_of(segment_.base())->consumer.position;
}
std::uint64_t* RingEnd::consumer_sleep() const {
  return &control_of(segment_.base())->consumer.sleep;
}

void RingEnd::set_sleep(std::uint64_t* count, std::uint64_t& mine, bool asleep) {
  if (((mine & 1) != 0) == asleep) return;
  // Announcing is seq_cst, as are the re-check's loads and the other side's publication and its load of
  // this count: in their single order one of the two sides sees the other (no fences: TSan models none).
  shared(count).store(++mine, asleep ? std::memory_order_seq_cst : std::memory_order_relaxed);
}

bool RingEnd::sleeper_to_wake(const std::uint64_t* count, std::uint64_t& rung) {
  const std::uint64_t sleep = shared(const_cast<std::uint64_t*>(count)).load(std::memory_order_seq_cst);
  if ((sleep & 1) == 0 || sleep == rung) return false;
  rung = sleep;
  return true;
}

std::uint64_t RingProducer::writable(std::uint64_t wanted) {
  std::uint64_t free = capacity() - (tail_ - known_head_);
  if (free < wanted) {
    known_head_ = shared(consumer_position()).load(std::memory_order_seq_cst);
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

void RingProducer::publish() {
  if (tail_ == published_tail_) return;
  published_tail_ = tail_;
  shared(producer_position()).store(tail_, std::memory_order_seq_cst);
}

std::uint64_t RingConsumer::readable() {
  if (known_tail_ == head_) known_tail_ = shared(producer_position()).load(std::memory_order_seq_cst);
  return known_tail_ - head_;
}

bool RingConsumer::publish() {
  if (head_ == published_head_) return false;
  published_head_ = head_;
  shared(consumer_position()).store(head_, std::memory_order_seq_cst);
  return true;
}

}  // namespace canopy::transport
