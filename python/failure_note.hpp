// The first error that ended a process group's communicator, as its calls met it. Elastic code asks for it
// after a training step raised: a group with a failure is shrunk, any other error is the program's own.
#pragma once

#include <exception>
#include <mutex>
#include <optional>

#include "canopy/error.hpp"

namespace canopy::pytorch {

class FailureNote {
 public:
  // Keeps `error` if it is the first canopy::Error that says the communicator failed. Errors that refuse
  // one call and leave the group usable (InvalidArgument, Config: bad tensors, bad settings) are skipped.
  void note(const std::exception_ptr& error);
  std::optional<Error> first() const;

 private:
  mutable std::mutex mutex_;
  std::optional<Error> first_;
};

}  // namespace canopy::pytorch
