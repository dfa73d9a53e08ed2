// The settings of the shared-memory links, and the process's share of the host's memory budget for rings.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "canopy/types.hpp"
#include "transport/mesh_options.hpp"

namespace canopy::transport {

class UnixListenerBook;

struct ShmOptions {
  std::uint64_t comm_id = 0;  // scopes the store keys and handshakes, as for TCP
  std::string job_token;      // presented in every handshake
  Duration connect_timeout = std::chrono::seconds(60);
  // A connection that has not said who it is by then is dropped.
  Duration handshake_timeout = std::chrono::seconds(2);
  // Each rank's host (MeshOptions::host_of_rank); this group's ranks on this host and their cores.
  std::vector<int> host_of_rank;
  int local_size = 0;
  int host_cores = 0;
  // Each direction between two ranks that talk gets a ring of this many bytes (a power of two), or less
  // where the budget is short. CANOPY_SHM_RING_BYTES.
  std::uint64_t ring_bytes = std::uint64_t{2} << 20;
  // A producer publishes at most this much at a time, so that the consumer copies (or reduces) one slot
  // while the next is written. CANOPY_SHM_SLOT_BYTES.
  std::uint64_t slot_bytes = std::uint64_t{256} << 10;
  // Messages of at least this many bytes go straight from the sender's buffer to the receiver's, where
  // the kernel lets ranks read each other's memory (process_vm_readv); 0: never.
  // CANOPY_SHM_SINGLE_COPY_BYTES.
  std::uint64_t single_copy_bytes = std::uint64_t{64} << 10;
  // What the rings of one host may take together; a ring that does not fit leaves its pair on TCP.
  // CANOPY_SHM_BYTES.
  std::uint64_t host_budget_bytes = std::uint64_t{32} << 20;
  // Each rank's cell where every rank of the group is on this host (host_cells.hpp); 0: none.
  // CANOPY_SHM_CELL_BYTES.
  std::uint64_t cell_bytes = 4096;
  // How long a rank busy-polls its rings before it blocks; unset, the spin rule decides (spin_rule.hpp:
  // kDefaultMemorySpin unless ranks outnumber cores 4 to 1). CANOPY_SHM_SPIN_US (0: never spins).
  std::optional<std::chrono::microseconds> spin;
  // MeshOptions::unix_listener_book and its mesh: the listener made, and the names published in the ranks'
  // records. Null: the mesh listens and the host's ranks agree on their names through the store.
  std::shared_ptr<UnixListenerBook> unix_listener_book;
  int unix_listener_book_mesh = 0;
  // With unix_listener_book: a pair's link is made when a message first needs it (shm_dialer.hpp), as TCP's
  // are (MeshOptions::store_for_first_use); false: every pair of the host meets while the mesh forms.
  bool links_on_first_use = false;

  // The mesh's facts, and CANOPY_SHM_RING_BYTES, CANOPY_SHM_SLOT_BYTES, CANOPY_SHM_SINGLE_COPY_BYTES,
  // CANOPY_SHM_BYTES and CANOPY_SHM_SPIN_US from its settings; Error(Config) for a ring that is not a power
  // of two or a slot that is not whole lines.
  static ShmOptions from(const MeshOptions& mesh);
};

// Whether a message of `bytes` of `collective` goes straight from the sender's buffer to the receiver's
// where the pair allows it (ShmOptions::single_copy_bytes). Not for the collectives that reduce what they
// receive: through the ring the sender copies and the receiver reduces, each on its own core, where a single
// copy would leave both to the receiver.
bool suits_single_copy(Collective collective, std::uint64_t bytes, std::uint64_t single_copy_bytes);

// What this process holds of the host's shared memory, against its share of the host's budget: the budget
// over the host's ranks (the most ranks any group this process joined has on this host). Two accounts: the
// rings, against the whole share, and its part of its groups' host cells (host_cells.hpp), against an eighth
// of it. Thread-safe.
class ShmBudget {
 public:
  // Reserves `bytes` when they fit in this account's part of this process's share; false otherwise.
  bool reserve(std::uint64_t bytes, std::uint64_t host_budget, int host_ranks);
  void release(std::uint64_t bytes);
  std::uint64_t held() const;

  static ShmBudget rings;
  static ShmBudget cells;

 private:
  explicit constexpr ShmBudget(std::uint64_t part) : part_(part) {}
  const std::uint64_t part_;  // the account may hold 1/part of the share
  std::uint64_t held_ = 0;
};

}  // namespace canopy::transport
