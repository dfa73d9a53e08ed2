// How long MeshTransport::progress() busy-polls: each part's own spin, counted only while that part has
// work, the longest of them when several do.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "transport/mesh_transport.hpp"

namespace canopy::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A part whose work never completes; it counts the passes of spins that drove it.
class IdlePart final : public IoPart {
 public:
  explicit IdlePart(bool busy) : busy_(busy) {}
  void post_send(OpId, int, const Envelope&, std::span<const std::byte>) override {}
  void post_recv(OpId, int, const Envelope&, std::span<std::byte>) override {}
  bool busy() const override { return busy_; }
  void drive(Pass pass, Completions&) override { spin_passes += pass == Pass::Spin ? 1 : 0; }
  std::uint64_t bytes_moved() const override { return 0; }
  bool prepare_to_block(std::vector<pollfd>&) override { return true; }
  void after_poll(std::span<const pollfd>) override {}
  void shut_down() override {}

  int spin_passes = 0;

 private:
  const bool busy_;
};

struct PartSpec {
  bool busy;
  microseconds spin;
};

// The spin passes of one progress() of 50 ms over a mesh of two such parts: it spins until its spin
// runs out, then blocks for the rest.
int spin_passes_in_50ms(PartSpec first, PartSpec second) {
  MeshTransport mesh(0, 2, "test");
  auto part = std::make_unique<IdlePart>(first.busy);
  const IdlePart& counted = *part;
  mesh.add_part(std::move(part), first.spin);
  mesh.add_part(std::make_unique<IdlePart>(second.busy), second.spin);
  std::vector<OpId> completed;
  EXPECT_FALSE(mesh.progress(Deadline::after(milliseconds(50)), completed));
  return counted.spin_passes;
}

TEST(MeshSpin, APartWithWorkSpinsForItsOwnSpinAndTheSpinDrivesEveryPart) {
  EXPECT_GT(spin_passes_in_50ms({true, microseconds(0)}, {true, microseconds(20'000)}), 0);
  EXPECT_EQ(spin_passes_in_50ms({true, microseconds(0)}, {true, microseconds(0)}), 0);
}

TEST(MeshSpin, APartWithoutWorkLendsNoSpin) {
  EXPECT_EQ(spin_passes_in_50ms({true, microseconds(0)}, {false, microseconds(200'000)}), 0);
}

// Both parts have work: a spin of 1 ms then a blocking wait against 50 ms of spinning.
TEST(MeshSpin, SeveralPartsWithWorkSpinAsLongAsTheLongest) {
  const int short_spin = spin_passes_in_50ms({true, microseconds(1'000)}, {true, microseconds(1'000)});
  const int longest = spin_passes_in_50ms({true, microseconds(1'000)}, {true, microseconds(100'000)});
  EXPECT_GT(longest, 5 * short_spin);
}

}  // namespace
}  // namespace canopy::transport
