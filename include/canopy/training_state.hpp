// Training state kept in memory, so that a group that lost a rank (Communicator::shrink) or admitted one
// (grow, join) goes on from the last step every member committed, without a checkpoint on disk
// (docs/GRADSYNC.md, *Going on after a lost rank*). Horovod elastic's State, for Canopy's communicators:
//
//   canopy::TrainingState state;
//   state.add("weights", canopy::tensor_view(std::span(weights)));
//   state.add("step", canopy::tensor_view(std::span(&step, 1)));
//   for (;;) {
//     try {
//       train_one_step(comm); ++step;
//       state.commit(step);                    // every step, after the optimizer
//     } catch (const canopy::Error& e) {       // a peer died, or the group was revoked
//       comm = comm.shrink();                  // or comm.grow() between steps, to admit a newcomer
//       state.restore(comm);                   // every member back at the same step, bit for bit
//     }
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "canopy/communicator.hpp"
#include "canopy/gradsync.hpp"

namespace canopy {

class TrainingState {
 public:
  // Registers a buffer (host memory, any type) to commit and restore. Every member registers the same
  // names, element counts and types, in the same order; a newcomer too, before its first restore().
  void add(std::string name, TensorView buffer);

  // Copies every buffer into this process's memory as the state after step `step`. The last two
  // commits are kept: where a rank died while the others committed a step, some survivors have committed
  // it and others not yet, one step apart.
  void commit(std::uint64_t step);
  // The latest step committed here; none before the first commit (or on a newcomer).
  std::optional<std::uint64_t> committed_step() const;

  // Collective on `comm`, every member (a shrunk or grown communicator): finds the latest step that every
  // member holding commits has committed, and copies that state into every member's buffers from the
  // lowest rank that holds it, byte for byte; it becomes every member's only commit. Returns the step;
  // none where no member had committed anything (then rank 0's buffers as they are go to everyone).
  // Error(Mismatch) on every member where their registered buffers differ.
  std::optional<std::uint64_t> restore(Communicator& comm);

 private:
  struct Buffer {
    std::string name;
    TensorView view;
    std::size_t bytes = 0;
  };
  struct Commit {
    std::uint64_t step = 0;
    std::vector<std::vector<std::byte>> copies;  // one per buffer
  };
  const Commit* commit_of(std::uint64_t step) const;
  void check_registrations_match(Communicator& comm) const;

  std::vector<Buffer> buffers_;
  std::vector<Commit> commits_;  // at most two, the latest last
};

}  // namespace canopy
