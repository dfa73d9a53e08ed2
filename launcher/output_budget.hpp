// How canopy-run passes on its ranks' output (--output prefixed|direct|auto), decided from a descriptor
// budget: prefixing holds two pipes per local rank in canopy-run, and on node 0 the store it hosts holds a
// socket for each connection of every rank of the job. `auto` prefixes while both fit under the descriptor
// limit (after raise_descriptor_limit) with room to spare, else lets the ranks write to canopy-run's own
// stdout and stderr and says why in one line.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <string>

namespace canopy::launcher {

enum class OutputMode { Auto, Prefixed, Direct };

// The store connections a rank of a Canopy job holds for the life of its communicator: one, which its
// liveness monitor shares (the connection is multiplexed, so a long get() never holds a heartbeat back).
inline constexpr int kStoreConnectionsPerRank = 1;
// Descriptors canopy-run opens for a moment beyond what it holds when it decides: a starting rank's two
// pipes and its start report (6), node 0's own client of its store and the server's end of it, the other
// nodes' end reports; the rest spare.
inline constexpr int kDescriptorHeadroom = 16;

struct DescriptorBudget {
  rlim_t limit = RLIM_INFINITY;  // canopy-run's soft RLIMIT_NOFILE, once raised
  bool limit_is_hard = true;     // it is the hard limit (what a user must raise), not a soft one left low
  int open_now = 0;              // descriptors canopy-run holds (standard streams, signalfd, the store...)
  int local_ranks = 1;           // --nproc
  int store_clients = 0;         // ranks that connect to the store this canopy-run hosts: the world size on
                                 // node 0, else 0
  int other_nodes = 0;           // nodes that report their end to this one's store (nnodes - 1 on node 0)

  std::uint64_t pipes() const { return 2 * static_cast<std::uint64_t>(local_ranks); }
  std::uint64_t store_connections() const {
    return static_cast<std::uint64_t>(kStoreConnectionsPerRank) * static_cast<std::uint64_t>(store_clients) +
           static_cast<std::uint64_t>(other_nodes);
  }
  // What canopy-run needs with (prefixed) or without its pipes.
  std::uint64_t needed(bool prefixed) const {
    return static_cast<std::uint64_t>(open_now) + kDescriptorHeadroom + store_connections() +
           (prefixed ? pipes() : 0);
  }
  bool fits(std::uint64_t count) const { return limit == RLIM_INFINITY || count <= limit; }
};

struct OutputChoice {
  bool prefixed = true;
  std::string notice;   // why auto chose direct: one line for stderr; "" otherwise
  std::string warning;  // the store's connections may not fit, whatever the output: one line; "" if they do
  std::string refusal;  // --output prefixed whose pipes cannot fit: canopy-run starts nothing; "" otherwise
  std::string summary;  // the budget in one line, for CANOPY_DEBUG=INFO
};

// The rule, a pure function of the mode and the budget (unit-tested).
OutputChoice choose_output(OutputMode mode, const DescriptorBudget& budget);

// The budget of this process now: its soft limit, and the descriptors it has open.
DescriptorBudget current_descriptor_budget(int local_ranks, int store_clients, int other_nodes);

}  // namespace canopy::launcher
