#include "transport/envelope.hpp"

#include <fmt/format.h>

namespace canopy::transport {

std::string describe(const Envelope& e) {
  if (e.collective == Collective::PointToPoint)
    return fmt::format("send/recv #{} (tag {}, {} elements of {})", e.seq, e.root, e.count, to_string(e.dtype));
  return fmt::format("{} #{} ({} {}, {} elements, algorithm {}, root {}, step {})", to_string(e.collective), e.seq,
                     to_string(e.dtype), to_string(e.op), e.count, e.algorithm, e.root, e.step);
}

}  // namespace canopy::transport
