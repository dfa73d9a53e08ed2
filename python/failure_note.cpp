#include "python/failure_note.hpp"

namespace canopy::pytorch {

void FailureNote::note(const std::exception_ptr& error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::Config) return;
    std::lock_guard lock(mutex_);
    if (!first_) first_ = e;
  } catch (...) {
    // not Canopy's: a torch error in a copy or a callback says nothing about the communicator
  }
}

std::optional<Error> FailureNote::first() const {
  std::lock_guard lock(mutex_);
  return first_;
}

}  // namespace canopy::pytorch
