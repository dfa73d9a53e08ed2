// Tells a rank that will never come from one that is late, by the heartbeats its liveness monitor leaves
// in the store (liveness_monitor.hpp): what an agreement among survivors (fault_agreement.hpp) waits on.
//
// A rank is gone when it destroyed its communicators ("liveness/left/<rank>"), when its process has
// ended on this rank's own host (the kernel says so at once: process_identity.hpp), when a watcher's
// monitor found it silent ("liveness/silent/<rank>") and its counter has not moved since, or when its
// counter has not moved for the heartbeat timeout, timed from when this rank first looked. Its monitor beats from
// a thread of its own, even after its communicator failed, so a survivor busy elsewhere is never gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "collectives/elastic/liveness_monitor.hpp"
#include "common/deadline.hpp"

namespace canopy::collectives {

class PeerSilence {
 public:
  // `store`: the family's liveness keys (CommunicatorFamily::failure_store); `family_ranks[r]` is rank r
  // of the communicator as a rank of its family's first communicator, whose monitor beats for it.
  // Null `store` or a monitor that is off: no rank is ever gone (the caller's deadline decides).
  PeerSilence(std::shared_ptr<Store> store, std::vector<int> family_ranks, LivenessSettings settings,
              bool beating);

  // Why `rank` will never take part ("rank 2 sent no heartbeat for 1.0 s"), or "" while it may.
  std::string gone(int rank);

 private:
  struct Seen {
    std::string beats;  // the counter's last value read ("" while it had none)
    Clock::time_point since{};
    bool looked = false;
    std::string process;  // its process's identity (process_identity.hpp), once read
  };

  std::shared_ptr<Store> store_;
  std::vector<int> family_ranks_;
  LivenessSettings settings_;
  bool beating_;
  std::vector<Seen> seen_;
};

}  // namespace canopy::collectives
