#include "transport/envelope.hpp"

#include <fmt/format.h>

#include <atomic>

namespace canopy::transport {
namespace {

constinit std::atomic<AlgorithmNamer> g_namer{nullptr};

std::string algorithm_name(Collective collective, std::uint8_t index) {
  const AlgorithmNamer namer = g_namer.load(std::memory_order_acquire);
  const std::string_view name = namer != nullptr ? namer(collective, index) : std::string_view{};
  return name.empty() ? fmt::format("algorithm {}", index) : std::string(name);
}

}  // namespace

void set_algorithm_namer(AlgorithmNamer namer) {
  g_namer.store(namer, std::memory_order_release);
}

std::string describe(const Envelope& e) {
  if (e.collective == Collective::PointToPoint)
    return fmt::format("send/recv #{} (tag {}, {} elements of {})", e.seq, e.root, e.count,
                       to_string(e.dtype));
  return fmt::format("{} #{} ({} {}, {} elements, {}, root {}, step {})", to_string(e.collective), e.seq,
                     to_string(e.dtype), to_string(e.op), e.count, algorithm_name(e.collective, e.algorithm),
                     e.root, e.step);
}

}  // namespace canopy::transport
