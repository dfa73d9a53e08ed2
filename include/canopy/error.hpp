// Every failure Canopy reports is a canopy::Error carrying a code a program can branch on
// and a message a person can act on (which call, which rank, what was expected).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace canopy {

enum class ErrorCode {
  InvalidArgument,  // the caller passed something that can never work (bad rank, bad size)
  Config,           // a missing or contradictory setting (names the variable)
  Timeout,          // a deadline passed
  PeerFailed,       // a peer closed, reset or stopped answering
  Mismatch,         // ranks called different collectives / sizes / types
  Protocol,         // a malformed frame or request
  Aborted,          // abort() was called on the communicator
  System,           // an operating-system call failed (errno in the message)
  // A limit of the machine or process was reached (file descriptors, memory, /dev/shm); the message names it.
  Resource,
  // The communicator was revoked (Communicator::revoke, by this rank or another): shrink() it to go on.
  Revoked,
  // New codes go last: a failure record in the store carries the number (collectives/elastic/first_failure.cpp).
};

std::string_view to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace canopy
