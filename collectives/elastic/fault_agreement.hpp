// An agreement that survives the death of its participants (MPI_Comm_agree), decided in the store.
//
// Every survivor of a communicator calls it with its flags and gets the bitwise AND of the flags of the
// ranks that took part, with the list of those ranks: the same answer on every rank, even when ranks die
// while it runs. Each rank sets a vote key of its own; the first rank that sees every rank either voted
// or gone writes the decision with compare_set, so one decision wins and every rank reads that one. A
// rank whose vote came too late for it learns that it was left out. The store is the trusted party: a
// store that dies is not survived. docs/ELASTIC.md, *The agreement, step by step*, has the argument.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "canopy/store.hpp"
#include "collectives/elastic/peer_silence.hpp"
#include "common/deadline.hpp"

namespace canopy::collectives {

struct Agreement {
  std::uint32_t value = ~std::uint32_t{0};  // the AND of the participants' flags
  std::vector<int> participants;            // ranks, in increasing order
  std::vector<std::pair<int, std::string>> left_out;  // the ranks counted as failed, and why
  std::string mismatch;  // set when ranks called different things (agree, shrink) in this place

  std::string encode() const;
  static Agreement decode(const std::string& text);  // throws Error(Protocol) on what encode() never wrote
};

struct AgreementRound {
  int rank = 0;
  int size = 1;
  std::string purpose = "agree";  // what the ranks call ("agree", "shrink"): all must call the same
  std::string what;               // "agreement #3 of communicator 5 (generation 1)", for messages
  Deadline deadline = Deadline::never();
  Duration poll{50};  // how often a waiting rank looks at the silent ones
};

// Runs one agreement in `store` (keys of this agreement alone). A rank that has not voted is left out
// once `silence` says it is gone, or when the deadline passes. Throws Error(Revoked) on a rank that the
// others left out (it came after they decided without it), Error(Mismatch) on every rank when ranks
// called it for different purposes, and Error(PeerFailed) when the store fails.
Agreement agree_in_store(Store& store, const AgreementRound& round, std::uint32_t flags, PeerSilence& silence);

}  // namespace canopy::collectives
