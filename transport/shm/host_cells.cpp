#include "transport/shm/host_cells.hpp"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/frame.hpp"
#include "transport/shm/shared_memory_file.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/shm/unix_socket.hpp"
#include "transport/spin_rule.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {
namespace {

constexpr std::uint64_t kCellsMagic = 0x534C4C4543594E43;  // "CNYCELLS"
constexpr std::uint64_t kCellsVersion = 3;
constexpr std::size_t kLine =
    128;  // a line per word: no false sharing, even with the adjacent-line prefetcher
constexpr std::size_t kStampOffset = kFrameHeaderSize;
constexpr std::size_t kPayloadOffset = 64;
constexpr int kLooksPerClockRead = 16;
constexpr std::uint64_t kLeastCellBytes = 64;
static_assert(kStampOffset + sizeof(std::uint64_t) == kPayloadOffset);

struct Identity {
  std::uint64_t magic;
  std::uint64_t version;
  std::uint64_t size;
  CellShape shape;
  std::uint64_t nonce;
};

// What rank 0 sends each rank with the segment's memfd (or, with bytes 0, to say there is none).
struct Offer {
  std::uint64_t magic;
  CellShape shape;
  std::uint64_t bytes;
  std::uint64_t nonce;
};
constexpr std::uint64_t kMostSlots = 64;
constexpr std::uint64_t kLeastSlots = 8;
constexpr std::uint64_t kCellsBeforeFewerSlots = 256;

constexpr std::size_t round_up(std::size_t bytes, std::size_t to) {
  return (bytes + to - 1) / to * to;
}
std::size_t cell_stride(std::uint64_t cell_bytes) {
  return round_up(kPayloadOffset + cell_bytes, kLine);
}
// The identity line, then each rank's done line (the last call it finished, its process id and pid
// namespace) and sleep line (its sleep count and its bell), then each rank's declared call, then the cells.
std::size_t control_bytes(int size) {
  return kLine * (1 + 3 * static_cast<std::size_t>(size));
}
// A declared call: a seqlock word (odd while it is written), then the call's frame header.
constexpr std::size_t kHeaderWords = kFrameHeaderSize / sizeof(std::uint64_t);
static_assert(kHeaderWords * sizeof(std::uint64_t) == kFrameHeaderSize && (1 + kHeaderWords) * 8 <= kLine);

// A stamp: the call's number in the low 56 bits, the envelope's flags in the top 8 (said about the call,
// never matched: a broadcast's root tells its readers that it calls back to back).
constexpr std::uint64_t kCallBits = 0x00FFFFFFFFFFFFFF;
constexpr std::uint64_t stamp_for(std::uint64_t call, std::uint8_t flags) {
  return call | (std::uint64_t{flags} << 56);
}

std::uint64_t load(const std::uint64_t* word) {
  return std::atomic_ref<const std::uint64_t>(*word).load(std::memory_order_seq_cst);
}
void store(std::uint64_t* word, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(*word).store(value, std::memory_order_seq_cst);
}

// This process's pid namespace (the inode of /proc/self/ns/pid; 0 where it cannot be told).
// Rings a rank's bell: ends its wait on it, or at once the wait it is about to begin.
void ring_bell(std::uint32_t* bell) {
  std::atomic_ref<std::uint32_t>(*bell).fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::uint64_t pid_namespace() {
  struct stat space {};
  return ::stat("/proc/self/ns/pid", &space) == 0 ? static_cast<std::uint64_t>(space.st_ino) : 0;
}

}  // namespace

CellShape CellShape::for_group(int size, std::uint64_t cell_bytes, std::uint64_t host_budget_bytes) {
  const std::uint64_t ranks = static_cast<std::uint64_t>(std::max(1, size));
  const std::uint64_t most_per_rank = host_budget_bytes / ranks / 8;
  CellShape shape{kMostSlots, cell_bytes};
  while (shape.part_per_rank(size) > most_per_rank) {
    if (shape.cell_bytes > kCellsBeforeFewerSlots)
      shape.cell_bytes /= 2;
    else if (shape.slots > kLeastSlots)
      shape.slots /= 2;
    else if (shape.cell_bytes > kLeastCellBytes)
      shape.cell_bytes /= 2;
    else
      return CellShape{};
  }
  return shape;
}

std::size_t CellShape::segment_bytes(int size) const {
  return control_bytes(size) + slots * static_cast<std::size_t>(size) * cell_stride(cell_bytes);
}

std::uint64_t CellShape::part_per_rank(int size) const {
  const auto ranks = static_cast<std::uint64_t>(std::max(1, size));
  return (segment_bytes(size) + ranks - 1) / ranks;
}

HostCells::HostCells(int rank, int size, CellShape shape, std::byte* base, Waiting waiting,
                     const AbortFlag& abort, std::uint64_t reserved_bytes)
    : rank_(rank),
      size_(size),
      shape_(shape),
      base_(base),
      mapped_bytes_(shape.segment_bytes(size)),
      cell_stride_(cell_stride(shape.cell_bytes)),
      cells_(base + control_bytes(size)),
      waiting_(waiting),
      abort_(abort),
      reserved_bytes_(reserved_bytes),
      rung_(static_cast<std::size_t>(size), 0),
      processes_(static_cast<std::size_t>(size)) {
  store(done_of(rank_) + 2, pid_namespace());
  store(done_of(rank_) + 1, static_cast<std::uint64_t>(::getpid()));
}

HostCells::~HostCells() {
  ::munmap(base_, mapped_bytes_);
  ShmBudget::cells.release(reserved_bytes_);
}

std::byte* HostCells::cell(std::uint64_t call, int rank) const {
  const std::uint64_t slot = call % shape_.slots;
  return cells_ +
         (slot * static_cast<std::uint64_t>(size_) + static_cast<std::uint64_t>(rank)) * cell_stride_;
}
std::uint64_t* HostCells::stamp_of(std::uint64_t call, int rank) const {
  return reinterpret_cast<std::uint64_t*>(cell(call, rank) + kStampOffset);
}
std::uint64_t* HostCells::done_of(int rank) const {
  return reinterpret_cast<std::uint64_t*>(base_ + kLine * (1 + 2 * static_cast<std::size_t>(rank)));
}
std::uint64_t* HostCells::sleep_of(int rank) const {
  return reinterpret_cast<std::uint64_t*>(base_ + kLine * (2 + 2 * static_cast<std::size_t>(rank)));
}
std::uint32_t* HostCells::bell_of(int rank) const {
  return reinterpret_cast<std::uint32_t*>(sleep_of(rank) + 1);
}
std::uint64_t* HostCells::declared_of(int rank) const {
  return reinterpret_cast<std::uint64_t*>(
      base_ + kLine * (1 + 2 * static_cast<std::size_t>(size_) + static_cast<std::size_t>(rank)));
}

void HostCells::declare(const Envelope& call) {
  Envelope declared = call;
  declared.step = 0;
  declared.flags = 0;
  const FrameBytes header = encode_frame(FrameHeader{.envelope = declared});
  std::array<std::uint64_t, kHeaderWords> words;
  std::memcpy(words.data(), header.data(), header.size());
  // Plain stores (on x86) into this rank's own line and nothing else: with more ranks than cores every line a
  // call touches is a cache miss after a switch. Only a blocked peer reads it; the seqlock tells it a torn
  // read. Each word's release store keeps the odd count before it, without a fence (ThreadSanitizer has
  // none).
  std::uint64_t* line = declared_of(rank_);
  std::atomic_ref<std::uint64_t> count(line[0]);
  const std::uint64_t before = count.load(std::memory_order_relaxed);
  count.store(before + 1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < kHeaderWords; ++i)
    std::atomic_ref<std::uint64_t>(line[1 + i]).store(words[i], std::memory_order_release);
  count.store(before + 2, std::memory_order_release);
}

std::optional<Envelope> HostCells::declared_by(int rank) const {
  std::uint64_t* line = declared_of(rank);
  const std::uint64_t before = std::atomic_ref<std::uint64_t>(line[0]).load(std::memory_order_acquire);
  if (before == 0 || before % 2 == 1) return std::nullopt;
  std::array<std::uint64_t, kHeaderWords> words;
  // Acquire loads: a word of a newer declaration makes the count read after them show that one too.
  for (std::size_t i = 0; i < kHeaderWords; ++i)
    words[i] = std::atomic_ref<std::uint64_t>(line[1 + i]).load(std::memory_order_acquire);
  if (std::atomic_ref<std::uint64_t>(line[0]).load(std::memory_order_relaxed) != before) return std::nullopt;
  FrameBytes header;
  std::memcpy(header.data(), words.data(), header.size());
  return decode_frame(header).envelope;
}

bool HostCells::declared_later(int peer, const Envelope& mine) const {
  const std::optional<Envelope> theirs = declared_by(peer);
  if (!theirs || theirs->seq < mine.seq) return false;
  if (theirs->seq == mine.seq && !same_message(*theirs, mine))
    fail(ErrorCode::Mismatch, "collective mismatch: rank {} runs {}; rank {} runs {}", rank_, describe(mine),
         peer, describe(*theirs));
  return theirs->seq > mine.seq;
}

template <typename Ready>
void HostCells::check_declarations(const Ready& ready, int awaited) const {
  const std::optional<Envelope> mine = declared_by(rank_);
  if (!mine) return;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || (awaited >= 0 && peer != awaited)) continue;
    // Its cell comes before its next declaration: one that went on without it will never write it.
    if (declared_later(peer, *mine) && awaited >= 0 && !ready())
      fail(ErrorCode::Mismatch,
           "collective mismatch: rank {} runs {} through the host's cells, but rank {} went on to its next "
           "call without writing its cell: it ran this call otherwise (another algorithm asked for?)",
           rank_, describe(*mine), peer);
  }
}

void HostCells::check_peers_run_this_call() const {
  const std::optional<Envelope> mine = declared_by(rank_);
  if (!mine) return;
  // A peer that ran a call through the cells which this rank runs (or ran) with messages stamped the cell
  // this rank's next call through them would read.
  const std::uint64_t next = call_ + 1;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    declared_later(peer, *mine);  // for its throw alone: whether the peer went on says nothing here
    if ((load(stamp_of(next, peer)) & kCallBits) != next) continue;
    const Envelope theirs =
        decode_frame(std::span<const std::byte, kFrameHeaderSize>(cell(next, peer), kFrameHeaderSize))
            .envelope;
    if (theirs.seq <= mine->seq)
      fail(ErrorCode::Mismatch,
           "collective mismatch: rank {} runs {} with messages; rank {} ran {} through the host's cells",
           rank_, describe(*mine), peer, describe(theirs));
  }
}

void HostCells::start(const Envelope& envelope, std::uint64_t payload_bytes) {
  if (payload_bytes > shape_.cell_bytes)
    fail(ErrorCode::InvalidArgument, "rank {}: {} bytes do not fit a host cell of {}", rank_, payload_bytes,
         shape_.cell_bytes);
  ++call_;
  heard_flags_ = 0;
  envelope_ = envelope;
  flags_ = envelope.flags;
  envelope_.flags = 0;  // the stamp carries them
  payload_bytes_ = payload_bytes;
  header_ = encode_frame(FrameHeader{.envelope = envelope_, .payload_bytes = payload_bytes_});
}

std::byte* HostCells::claim(Deadline deadline) {
  // Call c reuses the slot of call c - slots; the last time every rank was seen done is remembered.
  if (call_ > shape_.slots && everyone_done_ < call_ - shape_.slots) {
    const std::uint64_t needed = call_ - shape_.slots;
    // The slowest rank's last finished call: ranks that keep up are not looked at again for a while.
    auto all_done = [&] {
      std::uint64_t slowest = call_;
      for (int peer = 0; peer < size_; ++peer)
        if (peer != rank_) slowest = std::min(slowest, load(done_of(peer)));
      everyone_done_ = slowest;
      return slowest >= needed;
    };
    wait_until(all_done, -1, "end of the call whose slot this one reuses", deadline);
  }
  std::byte* mine = cell(call_, rank_);
  std::memcpy(mine, header_.data(), header_.size());
  return mine + kPayloadOffset;
}

void HostCells::publish() {
  store(stamp_of(call_, rank_), stamp_for(call_, flags_));
  wake_sleepers();
}

const std::byte* HostCells::wait_for(int peer, Deadline deadline) {
  const std::uint64_t* stamp = stamp_of(call_, peer);
  wait_until([&] { return (load(stamp) & kCallBits) == call_; }, peer, "cell", deadline);
  heard_flags_ |= static_cast<std::uint8_t>(load(stamp) >> 56);
  const std::byte* theirs = cell(call_, peer);
  if (std::memcmp(theirs, header_.data(), header_.size()) != 0) {
    const FrameHeader header =
        decode_frame(std::span<const std::byte, kFrameHeaderSize>(theirs, kFrameHeaderSize));
    check_frame(header, envelope_, payload_bytes_, rank_, peer);  // throws: the two differ
  }
  return theirs + kPayloadOffset;
}

void HostCells::finish() {
  store(done_of(rank_), call_);
  wake_sleepers();
}

std::vector<int> HostCells::ranks_behind() const {
  std::vector<int> behind;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && load(done_of(peer)) + shape_.slots < call_) behind.push_back(peer);
  return behind;
}

void HostCells::wake_sleepers() {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const std::uint64_t sleep = load(sleep_of(peer));
    if ((sleep & 1) == 0 || sleep == rung_[static_cast<std::size_t>(peer)]) continue;
    rung_[static_cast<std::size_t>(peer)] = sleep;
    ring_bell(bell_of(peer));
  }
}

template <typename Ready>
void HostCells::wait_until(const Ready& ready, int awaited, const char* what, Deadline deadline) {
  if (ready()) return;
  if (waiting_.spin.count() > 0 && spin(ready, deadline)) return;
  for (;;) {
    // The bell before the announcement: a peer that sees this sleep rings after this read.
    const std::uint32_t bell =
        std::atomic_ref<std::uint32_t>(*bell_of(rank_)).load(std::memory_order_seq_cst);
    store(sleep_of(rank_), ++sleep_count_);  // odd: asleep
    const bool came = ready();
    if (!came) check_declarations(ready, awaited);
    const int gone = came ? -1 : block_once(awaited, bell, what, deadline);
    store(sleep_of(rank_), ++sleep_count_);
    if (came || ready()) return;  // a peer that published and then left is no failure
    if (gone >= 0)
      throw PeerFailedError(gone, fmt::format("rank {}: rank {} ended (it exited or failed) while this rank "
                                              "waited for its {} in {}",
                                              rank_, gone, what, describe(envelope_)));
  }
}

bool HostCells::spin(const auto& ready, Deadline deadline) {
  const Deadline until = Deadline::after(waiting_.spin).earlier(deadline);
  const bool shared_cores = waiting_.looks_between_yields.count() == 0;
  Clock::time_point next_yield = Clock::now() + waiting_.looks_between_yields;
  for (;;) {
    // A look is a load of a line that stays in this core's cache until its writer stores: several looks
    // cost less than the clock read between them.
    for (int look = 0; look < kLooksPerClockRead; ++look) {
      if (ready()) return true;
      if (!shared_cores) pause_briefly();
    }
    if (companion_) companion_->step();
    const Clock::time_point now = Clock::now();
    if (now >= until.at() || abort_.raised()) return false;
    if (now >= next_yield) {
      ::sched_yield();
      next_yield = Clock::now() + waiting_.looks_between_yields;
    }
  }
}

// One wait on this rank's bell, of kLookAgain at most (kCompanionSlice beside a companion): returns when rung
// or it ends (a peer awaited that ended, or -1), or throws what ended the wait (abort, the deadline).
int HostCells::block_once(int awaited, std::uint32_t bell, const char* what, Deadline deadline) {
  abort_.throw_if_raised(rank_);
  if (deadline.expired())
    fail(ErrorCode::Timeout,
         "rank {}: {} through the host's cells timed out waiting for rank(s) {}, for their {}", rank_,
         describe(envelope_), fmt::join(awaited < 0 ? ranks_behind() : std::vector{awaited}, ", "), what);
  // A futex cannot join the companion's poll(): it moves, without blocking, between short waits instead.
  if (companion_ != nullptr) poll_beside(poll_fds_, companion_, Deadline(Clock::now()));
  const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(std::min<Clock::duration>(
      companion_ != nullptr ? Clock::duration(kCompanionSlice) : kLookAgain, deadline.remaining()));
  const timespec timeout{static_cast<time_t>(wait.count() / 1'000'000'000),
                         static_cast<long>(wait.count() % 1'000'000'000)};
  ::syscall(SYS_futex, bell_of(rank_), FUTEX_WAIT, bell, &timeout, nullptr, 0);
  abort_.throw_if_raised(rank_);
  // Whether a peer awaited ended, by its pidfd, after every wait.
  for (int peer : awaited < 0 ? ranks_behind() : std::vector{awaited})
    if (process_ended(peer)) return peer;
  return -1;
}

void HostCells::interrupt() {
  ring_bell(bell_of(rank_));
}

bool HostCells::process_ended(int peer) {
  UniqueFd& fd = processes_[static_cast<std::size_t>(peer)];
  if (!fd.valid()) {
    const std::uint64_t pid = load(done_of(peer) + 1), space = pid_namespace();
    if (pid == 0 || space == 0 || load(done_of(peer) + 2) != space) return false;  // cannot be told here
    fd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
    if (!fd.valid()) return errno == ESRCH;
  }
  pollfd ended{fd.get(), POLLIN, 0};
  return ::poll(&ended, 1, 0) > 0;
}

namespace {

// What a rank tells rank 0 after the offer (whether it mapped the cells), and rank 0's verdict to each:
// packets on the pair's socket, before the links take it, so the cells cost no store request.
struct Answer {
  std::uint64_t magic;
  std::uint64_t value;
};
constexpr std::uint64_t kMappedMagic = 0x44505041534C4C43;   // "CLLSAPPD": value 1 mapped, 0 not
constexpr std::uint64_t kVerdictMagic = 0x5443524453434C43;  // "CLCSDRCT": value kEveryRankMapped or a rank
constexpr std::uint64_t kEveryRankMapped = ~std::uint64_t{0};

int send_answer(int socket, std::uint64_t magic, std::uint64_t value) {
  const Answer answer{magic, value};
  return send_packet(socket, std::as_bytes(std::span(&answer, 1)));
}

// The next packet on `socket`, an Answer of `magic`; nullopt at its end, or for anything else (said at
// INFO); Error(Timeout) at the deadline, saying what `from` never sent.
std::optional<std::uint64_t> receive_answer(int rank, int socket, std::uint64_t magic, Deadline deadline,
                                            const std::string& from) {
  Answer answer{};
  UniqueFd ignored;
  long n = -EAGAIN;
  while (n == -EAGAIN) {
    if (!wait_readable(socket, deadline))
      fail(ErrorCode::Timeout, "rank {}: agreeing on the host's cells timed out: {}", rank, from);
    n = receive_packet(socket, std::as_writable_bytes(std::span(&answer, 1)), ignored);
  }
  if (n == static_cast<long>(sizeof(Answer)) && answer.magic == magic) return answer.value;
  log::info("rank {}: no host cells: {} {}", rank, n <= 0 ? "the socket closed where" : "another packet came",
            from);
  return std::nullopt;
}

// Rank 0: every peer's answer (did it map the cells?), then the verdict to every peer it reached: the first
// rank that did not map them, or kEveryRankMapped where all did (rank 0 too: `mapped`).
std::uint64_t gather_and_judge(int size, const ShmPeers& peers, bool mapped, Deadline deadline) {
  std::uint64_t verdict = mapped ? kEveryRankMapped : 0;
  for (int peer = 1; peer < size; ++peer) {
    const int socket = peers.links[peer].socket.get();
    const auto answer = socket < 0
                            ? std::nullopt
                            : receive_answer(0, socket, kMappedMagic, deadline,
                                             fmt::format("rank {} never said whether it mapped them", peer));
    if (verdict == kEveryRankMapped && answer != std::optional<std::uint64_t>(1))
      verdict = static_cast<std::uint64_t>(peer);
  }
  for (int peer = 1; peer < size; ++peer)
    if (const int socket = peers.links[peer].socket.get(); socket >= 0)
      if (int problem = send_answer(socket, kVerdictMagic, verdict); problem != 0)
        log::info("rank 0: telling rank {} whether every rank mapped the host's cells: {}", peer,
                  std::strerror(problem));
  return verdict;
}

// Rank 0: the segment, mapped, offered to every peer; null (every peer told) where it cannot be made or
// is not `wanted`.
std::byte* make_and_offer(int size, const ShmPeers& peers, CellShape shape, bool wanted) {
  std::byte* base = nullptr;
  UniqueFd fd;
  Offer offer{kCellsMagic, shape, 0, 0};
  const std::size_t bytes = shape.segment_bytes(size);
  if (wanted) {
    try {
      std::random_device entropy;
      const std::uint64_t nonce = (std::uint64_t{entropy()} << 32) ^ entropy();
      fd = create_shared_memory("canopy-cells", bytes, "the host's cells");
      base = map_shared_memory(fd.get(), bytes);
      *reinterpret_cast<Identity*>(base) =
          Identity{kCellsMagic, kCellsVersion, static_cast<std::uint64_t>(size), shape, nonce};
      offer = Offer{kCellsMagic, shape, bytes, nonce};
    } catch (const std::exception& e) {
      log::info("rank 0: no host cells: {}", e.what());
    }
  }
  for (int peer = 1; peer < size; ++peer)
    if (const int socket = peers.links[peer].socket.get(); socket >= 0)
      if (int problem =
              send_packet(socket, std::as_bytes(std::span(&offer, 1)), offer.bytes > 0 ? fd.get() : -1);
          problem != 0)
        log::info("rank 0: offering the host's cells to rank {}: {}", peer, std::strerror(problem));
  return base;
}

// The others: rank 0's offer (always read: the links take the socket next), mapped and checked; null where
// there is none, it is not `wanted` or it is not what it says.
std::byte* take_offer(int rank, int size, const ShmPeers& peers, const ShmOptions& options, CellShape shape,
                      bool wanted, Deadline deadline) {
  const int socket = peers.links[0].socket.get();
  Offer offer{};
  UniqueFd fd;
  long n = -EAGAIN;
  while (n == -EAGAIN) {
    if (!wait_readable(socket, deadline))
      fail(ErrorCode::Timeout,
           "rank {}: shared-memory set-up for comm {} timed out: rank 0 never offered its cells", rank,
           options.comm_id);
    n = receive_packet(socket, std::as_writable_bytes(std::span(&offer, 1)), fd);
  }
  if (n != static_cast<long>(sizeof(Offer)) || offer.magic != kCellsMagic) {
    log::info("rank {}: no host cells: rank 0 sent {} bytes, not its offer", rank, n);
    return nullptr;
  }
  if (offer.bytes == 0 || !wanted) return nullptr;  // rank 0, or this rank, said why
  const std::size_t bytes = shape.segment_bytes(size);
  try {
    if (!fd.valid() || offer.shape != shape || offer.bytes != bytes)
      fail(ErrorCode::Protocol,
           "shared memory: rank 0 offered {} slots of {}-byte cells in {} bytes, not {} of {} in {}",
           offer.shape.slots, offer.shape.cell_bytes, offer.bytes, shape.slots, shape.cell_bytes, bytes);
    check_offered_memory(fd.get(), bytes, "host cells");
    std::byte* base = map_shared_memory(fd.get(), bytes);
    const Identity& identity = *reinterpret_cast<const Identity*>(base);
    if (identity.magic == kCellsMagic && identity.version == kCellsVersion &&
        identity.size == static_cast<std::uint64_t>(size) && identity.shape == shape &&
        identity.nonce == offer.nonce)
      return base;
    ::munmap(base, bytes);
    fail(ErrorCode::Protocol,
         "shared memory: the offered cells are not the ones announced (their identity differs)");
  } catch (const Error& e) {
    log::info("rank {}: no host cells: {}", rank, e.what());
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<HostCells> share_host_cells(int rank, int size, const ShmPeers& peers,
                                            const ShmOptions& options, HostCells::Waiting waiting,
                                            const AbortFlag& abort) {
  const auto& hosts = options.host_of_rank;
  if (size < 2 || hosts.size() != static_cast<std::size_t>(size) ||
      std::count(hosts.begin(), hosts.end(), hosts[0]) != size)
    return nullptr;
  const Deadline deadline = Deadline::after(options.connect_timeout);
  const bool reached_all = peers.sharing.size() == static_cast<std::size_t>(size - 1);
  const CellShape shape = CellShape::for_group(size, options.cell_bytes, options.host_budget_bytes);
  const std::string wish = fmt::format("{} slots of {} bytes", shape.slots, shape.cell_bytes);
  if (!reached_all || shape.slots == 0)
    log::info("rank {}: comm {}: no host cells: {}", rank, options.comm_id,
              !reached_all ? "this rank did not reach every other through shared memory"
                           : "CANOPY_SHM_CELL_BYTES and CANOPY_SHM_BYTES leave no room for them");
  // Each rank holds its part of the segment against an eighth of its share of the budget, all its groups'
  // cells together: a job that makes many groups runs out of cells, not of memory.
  const std::uint64_t part = shape.part_per_rank(size);
  const bool reserved =
      reached_all && shape.slots > 0 && ShmBudget::cells.reserve(part, options.host_budget_bytes, size);
  if (reached_all && shape.slots > 0 && !reserved)
    log::info(
        "rank {}: comm {}: no host cells: this rank's groups hold an eighth of its share of CANOPY_SHM_BYTES "
        "in cells already",
        rank, options.comm_id);
  // A rank that did not reach rank 0 has no say, and needs none: rank 0 did not reach it either, and tells
  // the others that not every rank mapped the cells. Rank 0 offers the same shape to every rank; a rank
  // that wants another (other CANOPY_SHM_CELL_BYTES or CANOPY_SHM_BYTES) says so and maps nothing.
  std::byte* base = nullptr;
  if (rank == 0)
    base = make_and_offer(size, peers, shape, reserved);
  else if (peers.links[0].socket.valid())
    base = take_offer(rank, size, peers, options, shape, reserved, deadline);
  std::uint64_t verdict = 0;
  if (rank == 0) {
    verdict = gather_and_judge(size, peers, base != nullptr, deadline);
  } else if (const int socket = peers.links[0].socket.get(); socket >= 0) {
    if (int problem = send_answer(socket, kMappedMagic, base != nullptr ? 1 : 0); problem != 0)
      log::info("rank {}: telling rank 0 whether it mapped the host's cells: {}", rank,
                std::strerror(problem));
    verdict = receive_answer(rank, socket, kVerdictMagic, deadline,
                             "rank 0 never said whether every rank mapped them")
                  .value_or(0);
  }
  auto cells =
      base == nullptr ? nullptr : std::make_unique<HostCells>(rank, size, shape, base, waiting, abort, part);
  if (base == nullptr && reserved) ShmBudget::cells.release(part);  // HostCells holds it where made
  if (verdict != kEveryRankMapped) {
    if (cells)
      log::info("rank {}: comm {}: no host cells: rank {} did not map them ({}; rank 0 says)", rank,
                options.comm_id, verdict, wish);
    return nullptr;
  }
  if (cells)
    log::debug("rank {}: comm {}: host cells: {} for {} ranks ({} bytes in all)", rank, options.comm_id, wish,
               size, shape.segment_bytes(size));
  return cells;
}

}  // namespace canopy::transport
