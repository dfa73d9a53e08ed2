// The first failure of a communicator, shared through the store so that every rank blames the same rank.
//
// When rank 2 dies, its neighbours see its sockets close and abort their own transports; the ranks that
// only talked to those neighbours then see *them* close. Without help they would name the neighbour. So
// a rank that fails writes its error to the store before it aborts (the first writer wins), and a rank
// whose own error came later reports that first one. Publishing before aborting makes the order causal:
// whoever learns of a failure through an abort finds the record already there.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "canopy/error.hpp"
#include "canopy/store.hpp"

namespace canopy::collectives {

// A failure as one rank reported it to the others.
struct FailureRecord {
  ErrorCode code = ErrorCode::PeerFailed;
  int reporter = -1;    // the rank that wrote it
  std::string message;  // its error message, which names the failed rank ("rank 0: connection to rank 2 ...")

  std::string encode() const;
  static FailureRecord decode(const std::string& bytes);
};

class FirstFailure {
 public:
  // `store` is this communicator's own store (its keys are the communicator's alone); null turns
  // publishing off, so that every error is reported as this rank saw it.
  FirstFailure(std::shared_ptr<Store> store, int rank);

  // Publishes `error` as the communicator's first failure unless one is there already, and returns the
  // error to report: `error` itself when it was first, else one leading with the first failure (with
  // its code), followed by what this rank saw. Where the store cannot be reached and no first failure is
  // known here, `error` with the store's own error after it: that failure may be the cause of this one.
  Error blame(const Error& error);

  // The first failure, once a rank published one; nullopt before. Throws when the store fails.
  std::optional<FailureRecord> read();

  // The message of `first` as this rank reports it.
  std::string explain(const FailureRecord& first) const;

 private:
  // The record once this rank wrote or read it: the first failure never changes, so later blames need no
  // store (which may be gone by then, as when the failure ended the job on the store's host).
  std::optional<FailureRecord> known() const;
  void learn(const FailureRecord& first);

  std::shared_ptr<Store> store_;
  int rank_;
  mutable std::mutex mutex_;
  std::optional<FailureRecord> known_;
};

}  // namespace canopy::collectives
