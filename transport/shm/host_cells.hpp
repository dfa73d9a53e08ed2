// The cells of a group whose ranks all share one host, in one segment every rank maps: what the one-shot
// collectives (collectives/one_shot.hpp) run on. A rank writes its contribution to a call into its own
// cell and reads the others' where they lie: one round whatever the number of ranks, where a schedule
// through the rings takes lg p rounds or more, each a wait for a process that may not have a core.
//
// Calls go through the slots in turn (64, fewer where the host's budget is short: CellShape). A cell holds a
// frame header (the call's envelope, checked by every reader as a message's is), a stamp (the call's number
// among this group's calls through the cells, from 1, and the envelope's flags), then the payload. Each rank
// also has a line saying the last call it finished reading, one announcing that it sleeps, and one declaring
// the call it runs, through the cells or not, each on its own 128-byte line. A rank writes its cell of call c
// only once every rank finished reading call c - slots: a broadcast's root runs up to slots - 1 calls ahead
// of its slowest reader, and never overwrites what one still reads.
//
// Waiting spins as the rings do (their spin, yielding between looks where ranks share cores), then announces
// a sleep, looks again, and blocks on a futex word of its own in the segment (its bell), for kLookAgain at
// most: then it looks whether the peers it waits for ended (a pidfd each, opened when first waited for:
// no descriptor a peer while the group forms) and whether the mesh was aborted. After it publishes (a
// stamp, a finished call), a rank reads the sleep lines and rings each new sleeper's bell (an increment and
// a FUTEX_WAKE): announcing and publishing are seq_cst stores, each followed by a seq_cst load of the other
// side's word, and a sleeper reads its bell before it announces, so no wake-up is lost.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/deadline.hpp"
#include "transport/abort_flag.hpp"
#include "transport/envelope.hpp"
#include "transport/frame.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

class Companion;
struct ShmPeers;
struct ShmOptions;

// How many slots, and how much payload a cell holds.
struct CellShape {
  std::uint64_t slots = 0;
  std::uint64_t cell_bytes = 0;
  // The shape for `size` ranks asking for cells of `cell_bytes`: 64 slots of such cells where each rank's
  // share of them takes at most an eighth of its share of the host's budget (CANOPY_SHM_BYTES); beyond
  // that, smaller cells down to 256 bytes, then fewer slots down to 8, then cells down to 64 bytes; none
  // (slots 0) where even those do not fit. Every rank computes the same.
  static CellShape for_group(int size, std::uint64_t cell_bytes, std::uint64_t host_budget_bytes);
  // The segment's size for a group of `size` ranks, and each rank's part of it.
  std::size_t segment_bytes(int size) const;
  std::uint64_t part_per_rank(int size) const;
  bool operator==(const CellShape&) const = default;
};

class HostCells {
 public:
  // How a rank waits: spin this long (0: block at once), yielding the core at least this often.
  struct Waiting {
    std::chrono::microseconds spin{0};
    std::chrono::nanoseconds looks_between_yields{0};
  };
  // Takes the mapping at `base` of shape.segment_bytes(size) (unmapped on destruction), laid out for this
  // group, and writes this process's id in its line there. `reserved_bytes`: this rank's part of the
  // segment, held in ShmBudget's account of cells until then.
  HostCells(int rank, int size, CellShape shape, std::byte* base, Waiting waiting, const AbortFlag& abort,
            std::uint64_t reserved_bytes);
  ~HostCells();
  HostCells(const HostCells&) = delete;
  HostCells& operator=(const HostCells&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The most payload a cell holds, and how many calls' cells there are.
  std::uint64_t cell_bytes() const { return shape_.cell_bytes; }
  std::uint64_t slots() const { return shape_.slots; }

  // Starts this rank's next call through the cells: every rank makes the same calls in the same order, and
  // every cell of it must carry `envelope` and `payload_bytes` (at most cell_bytes()).
  void start(const Envelope& envelope, std::uint64_t payload_bytes);
  // Where this rank's payload goes, once no rank still reads the call that last used the slot. Then
  // publish() makes the cell visible.
  std::byte* claim(Deadline deadline);
  void publish();
  // `peer`'s payload of this call once it published it. Error(Mismatch) naming both calls when its envelope
  // or size differ from this rank's; PeerFailedError when it died first; Timeout at the deadline; Aborted.
  const std::byte* wait_for(int peer, Deadline deadline);
  // This rank read everything of the call it needs: the slot may be reused.
  void finish();
  // The flags (Envelope::flags) of the cells this call read, ORed: what Transport::take_arrived_flags()
  // says of messages.
  std::uint8_t heard_flags() const { return heard_flags_; }

  // Every call of the group, through the cells or through messages, says what it is before it runs (its
  // envelope; step and flags are left out). A rank that runs a call through the cells and one that runs it
  // with messages never read each other's headers: a waiter that blocks looks at these instead.
  void declare(const Envelope& call);
  // Ends this rank's wait on its bell at once, from any thread (MeshTransport::abort).
  void interrupt();
  // How long a blocked waiter sleeps before it looks at the peers' declarations again.
  static constexpr std::chrono::milliseconds kLookAgain{20};
  // The longest wait on the bell while a companion (transport.hpp) has to be kept moving too.
  static constexpr std::chrono::microseconds kCompanionSlice{200};
  // For a rank blocked in a call through messages: Error(Mismatch) naming both calls where a peer declared
  // this call otherwise, or ran it through the cells. The cells' own waits look the same way.
  void check_peers_run_this_call() const;
  // The companion its waits keep moving (transport.hpp), as the mesh's progress() does; null for none.
  void set_companion(Companion* companion) { companion_ = companion; }

 private:
  std::byte* cell(std::uint64_t call, int rank) const;
  std::uint64_t* stamp_of(std::uint64_t call, int rank) const;
  std::uint64_t* done_of(int rank) const;
  std::uint64_t* sleep_of(int rank) const;
  std::uint32_t* bell_of(int rank) const;
  // Whether `peer`'s process ended, by a pidfd opened when first asked from the id it wrote; false where
  // that cannot be told (not written yet, another pid namespace).
  bool process_ended(int peer);
  std::uint64_t* declared_of(int rank) const;
  // `rank`'s last declared call, or nothing while it is being written or none was.
  std::optional<Envelope> declared_by(int rank) const;
  // Error(Mismatch) where `peer` declared `mine` otherwise; true where it declared a later call.
  bool declared_later(int peer, const Envelope& mine) const;
  // Where this rank waits for `awaited`'s cell (every peer's done line for -1): Error(Mismatch) when a
  // peer declared this call otherwise, or went on to a later call while its cell is still not `ready()`.
  template <typename Ready>
  void check_declarations(const Ready& ready, int awaited) const;
  // The peers that have not finished the call whose slot this one reuses: the only wait for every peer.
  std::vector<int> ranks_behind() const;
  void wake_sleepers();
  // Waits until `ready()`; `awaited` is the peer it waits for (-1: every peer), `what` what it waits for.
  template <typename Ready>
  void wait_until(const Ready& ready, int awaited, const char* what, Deadline deadline);
  bool spin(const auto& ready, Deadline deadline);
  int block_once(int awaited, std::uint32_t bell, const char* what, Deadline deadline);

  const int rank_;
  const int size_;
  const CellShape shape_;
  std::byte* const base_;
  const std::size_t mapped_bytes_;
  const std::size_t cell_stride_;
  std::byte* const cells_;
  const Waiting waiting_;
  const AbortFlag& abort_;
  const std::uint64_t reserved_bytes_;
  std::uint64_t call_ = 0;  // this rank's current call through the cells (1, 2, ...)
  Envelope envelope_;       // and what every cell of it must carry
  std::uint64_t payload_bytes_ = 0;
  std::uint8_t flags_ = 0;  // this rank's, in its stamp
  std::uint8_t heard_flags_ = 0;
  FrameBytes header_{};              // the two encoded: a cell's header matches when its bytes do
  std::uint64_t everyone_done_ = 0;  // every rank was seen to have finished this call
  std::uint64_t sleep_count_ = 0;    // this rank's sleep announcements (odd: asleep)
  std::vector<std::uint64_t> rung_;  // per peer: the sleep it was last woken from
  std::vector<UniqueFd> processes_;  // per peer: its pidfd, once waited for
  std::vector<pollfd> poll_fds_;     // the companion's, between waits on the bell
  Companion* companion_ = nullptr;
};

// Every rank of a group calls this after connect_shm_peers(), before the links use the sockets. Where the
// whole group is on this host, every pair of its ranks shares memory (ShmPeers::sharing: each rank has its
// link with rank 0 now, the others may come on first use) and every rank wants the same
// cells (ShmOptions::cell_bytes, CANOPY_SHM_CELL_BYTES, and the same budget), rank 0 makes the segment
// (CellShape::for_group) and passes it to each rank over their socket; null elsewhere, or when any rank
// could not map it (said at INFO): every rank of the group gets cells, or none. The ranks agree over their
// sockets with rank 0 (each says whether it mapped the cells, rank 0 answers whether all did), not
// through the store.
std::unique_ptr<HostCells> share_host_cells(int rank, int size, const ShmPeers& peers,
                                            const ShmOptions& options, HostCells::Waiting waiting,
                                            const AbortFlag& abort);

}  // namespace canopy::transport
