#include "collectives/broadcast_stream.hpp"

#include "transport/envelope.hpp"

namespace canopy::collectives {

std::uint8_t BroadcastStream::flags_at_start(bool follows, bool is_root, Clock::time_point started,
                                             double one_call_seconds) {
  // Compared in the clock's own unit: converting the gap to seconds would divide on every call.
  root_back_to_back_ = root_may_be_back_to_back(follows, is_root) &&
                       started - *last_end_ < std::chrono::duration<double>(one_call_seconds);
  return root_back_to_back_ ? transport::kFlagRootInStream : 0;
}

void BroadcastStream::finished(bool follows, bool is_root, std::uint8_t heard_flags) {
  if (!follows) {
    in_stream_.store(false, std::memory_order_relaxed);
    last_end_.reset();
    return;
  }
  const bool root_in_stream =
      is_root ? root_back_to_back_ : (heard_flags & transport::kFlagRootInStream) != 0;
  in_stream_.store(root_in_stream, std::memory_order_relaxed);
  last_end_ = Clock::now();
}

}  // namespace canopy::collectives
