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

// A part whose work never completes; it counts the passes of spins that drove it, and when the first and
// the last came.
class IdlePart final : public IoPart {
 public:
  explicit IdlePart(bool busy) : busy_(busy) {}
  void post_send(OpId, int, const Envelope&, std::span<const std::byte>) override {}
  void post_recv(OpId, int, const Envelope&, std::span<std::byte>) override {}
  bool busy() const override { return busy_; }
  void drive(Pass pass, Completions&) override {
    if (pass != Pass::Spin) return;
    last_spin = Clock::now();
    if (spin_passes++ == 0) first_spin = last_spin;
  }
  std::uint64_t bytes_moved() const override { return 0; }
  bool prepare_to_block(std::vector<pollfd>&) override { return true; }
  void after_poll(std::span<const pollfd>) override {}
  void shut_down() override {}

  int spin_passes = 0;
  Clock::time_point first_spin, last_spin;

 private:
  const bool busy_;
};

struct PartSpec {
  bool busy;
  microseconds spin;
};

// What the first part saw of one progress() of 50 ms over a mesh of two such parts, which spins until its
// spin runs out, then blocks for the rest: its spin passes, and the time from the first to the last. A spin
// offers the core to others (sched_yield), so on a loaded machine a pass may wait a whole time slice: how
// long it spun is timed, not counted.
struct SpinSeen {
  int passes = 0;
  Clock::duration spun{};
};

SpinSeen spin_in_50ms(PartSpec first, PartSpec second) {
  MeshTransport mesh(0, 2, "test");
  auto part = std::make_unique<IdlePart>(first.busy);
  const IdlePart& watched = *part;
  mesh.add_part(std::move(part), first.spin);
  mesh.add_part(std::make_unique<IdlePart>(second.busy), second.spin);
  std::vector<OpId> completed;
  EXPECT_FALSE(mesh.progress(Deadline::after(milliseconds(50)), completed));
  return {watched.spin_passes, watched.last_spin - watched.first_spin};
}

int spin_passes_in_50ms(PartSpec first, PartSpec second) { return spin_in_50ms(first, second).passes; }

TEST(MeshSpin, APartWithWorkSpinsForItsOwnSpinAndTheSpinDrivesEveryPart) {
  EXPECT_GT(spin_passes_in_50ms({true, microseconds(0)}, {true, microseconds(20'000)}), 0);
  EXPECT_EQ(spin_passes_in_50ms({true, microseconds(0)}, {true, microseconds(0)}), 0);
}

TEST(MeshSpin, APartWithoutWorkLendsNoSpin) {
  EXPECT_EQ(spin_passes_in_50ms({true, microseconds(0)}, {false, microseconds(200'000)}), 0);
}

// Both parts have work: a spin of 1 ms then a blocking wait against 50 ms of spinning.
TEST(MeshSpin, SeveralPartsWithWorkSpinAsLongAsTheLongest) {
  EXPECT_LT(spin_in_50ms({true, microseconds(1'000)}, {true, microseconds(1'000)}).spun, milliseconds(15));
  EXPECT_GT(spin_in_50ms({true, microseconds(1'000)}, {true, microseconds(100'000)}).spun, milliseconds(30));
}

}  // namespace
}  // namespace canopy::transport
