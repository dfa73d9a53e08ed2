// TrainingState between real processes: a rank is SIGKILLed, the survivors shrink and restore the last
// step every one of them committed (also where one had committed a step further), bit for bit; a
// process started later joins a grow and gets the same state. Every wait is bounded.
#include "canopy/training_state.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/process_group.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/scoped_env.hpp"

namespace canopy {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::ProcessGroup;
using testing::Reporter;
using testing::require;

constexpr std::size_t kWeights = 1000;

// What a training step does to the weights, the same on every member: each adds its rank + 1 times a
// ramp, the sum is all-reduced, and a small step of it is taken.
void train_step(Communicator& comm, std::vector<float>& weights) {
  std::vector<float> gradient(kWeights);
  for (std::size_t i = 0; i < kWeights; ++i) gradient[i] = static_cast<float>((comm.rank() + 1) * (i + 1));
  comm.all_reduce(std::span(gradient));
  for (std::size_t i = 0; i < kWeights; ++i) weights[i] += gradient[i] * 1e-3f;
}

// The weights after steps taken by groups of `sizes[s]` ranks each, replayed in this process.
std::vector<float> replay(const std::vector<int>& sizes) {
  std::vector<float> weights(kWeights, 0.0f);
  for (int n : sizes)
    for (std::size_t i = 0; i < kWeights; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += static_cast<float>((r + 1) * (i + 1));
      weights[i] += sum * 1e-3f;
    }
  return weights;
}

struct Trainer {
  std::vector<float> weights = std::vector<float>(kWeights, 0.0f);
  std::int64_t step = 0;
  TrainingState state;
  Trainer() {
    state.add("weights", tensor_view(std::span(weights)));
    state.add("step", tensor_view(std::span(&step, 1)));
  }
};

class TrainingStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("CANOPY_HEARTBEAT_SECONDS", "0.1").set("CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "1.5");
    env_.set("CANOPY_SOCKET_IFNAME", "lo").set("CANOPY_TRANSPORT", "tcp");
  }
  testing::ScopedEnv env_;
  testing::TempDir dir_;
};

// Four ranks commit steps 1-4; rank 3 dies; rank 0 commits a step 5 the others never reach. The
// survivors shrink, restore step 4 (rank 0 from its older commit) and train two steps more as three.
TEST_F(TrainingStateTest, SurvivorsRestoreTheLastStepEveryOneCommitted) {
  const std::string path = dir_.path();
  ProcessGroup group(4, [path](int rank, const Reporter& reporter) {
    Communicator comm(open_file_store(path), rank, 4, testing::group_options("state-test"));
    Trainer trainer;
    for (int s = 1; s <= 4; ++s) {
      train_step(comm, trainer.weights);
      trainer.step = s;
      trainer.state.commit(static_cast<std::uint64_t>(s));
    }
    if (rank == 3) ::raise(SIGKILL);
    try {
      train_step(comm, trainer.weights);  // step 5 needs rank 3
      throw std::runtime_error("step 5 completed without rank 3");
    } catch (const Error&) {
    }
    if (rank == 0) {  // as if it had committed step 5 before the failure reached it
      trainer.step = 5;
      std::fill(trainer.weights.begin(), trainer.weights.end(), -1.0f);
      trainer.state.commit(5);
    }
    Communicator smaller = comm.shrink();
    const std::optional<std::uint64_t> restored = trainer.state.restore(smaller);
    require(restored == 4u, "restored step {}", restored ? static_cast<long>(*restored) : -1L);
    require(trainer.step == 4, "the step counter is {}", trainer.step);
    require(trainer.weights == replay({4, 4, 4, 4}), "the weights of step 4 differ after restore");
    for (int s = 5; s <= 6; ++s) {
      train_step(smaller, trainer.weights);
      trainer.step = s;
      trainer.state.commit(static_cast<std::uint64_t>(s));
    }
    require(trainer.weights == replay({4, 4, 4, 4, 3, 3}), "the weights after two steps as three differ");
    reporter.outcome("ok");
  });
  ASSERT_TRUE(group.wait_ended({0, 1, 2, 3}, Clock::now() + 30s)) << "a rank did not end within 30 s";
  EXPECT_EQ(group.end(3).signal, SIGKILL);
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(group.end(r).ok() && group.end(r).outcome == "ok") << group.end(r).describe();
}

// Three members commit three steps and grow; the newcomer, with nothing committed, gets step 3's state
// from rank 0, and all four train on alike.
TEST_F(TrainingStateTest, ANewcomerGetsTheStateAtAGrow) {
  const std::string path = dir_.path();
  ProcessGroup group(4, [path](int index, const Reporter& reporter) {
    auto options = testing::group_options("state-test");
    Trainer trainer;
    Communicator comm = index == 3 ? Communicator::join(open_file_store(path), options)
                                   : Communicator(open_file_store(path), index, 3, options);
    if (index < 3) {
      for (int s = 1; s <= 3; ++s) {
        train_step(comm, trainer.weights);
        trainer.step = s;
        trainer.state.commit(static_cast<std::uint64_t>(s));
      }
      for (int attempt = 0; attempt < 40 && comm.size() < 4; ++attempt) {
        std::this_thread::sleep_for(25ms);
        comm = comm.grow();
      }
      require(comm.size() == 4, "grew to {} ranks", comm.size());
    }
    require(trainer.state.restore(comm) == 3u, "restored another step than 3");
    require(trainer.step == 3 && trainer.weights == replay({3, 3, 3}), "step 3's state differs on rank {}",
            comm.rank());
    train_step(comm, trainer.weights);
    require(trainer.weights == replay({3, 3, 3, 4}), "the weights after a step as four differ");
    reporter.outcome("ok");
  });
  ASSERT_TRUE(group.wait_ended({0, 1, 2, 3}, Clock::now() + 30s)) << "a process did not end within 30 s";
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(group.end(r).ok() && group.end(r).outcome == "ok") << group.end(r).describe();
}

// Members that registered other buffers are told so on every rank, not restored into garbage.
TEST_F(TrainingStateTest, DifferentRegistrationsAreAMismatchOnEveryRank) {
  const std::string path = dir_.path();
  ProcessGroup group(2, [path](int rank, const Reporter& reporter) {
    Communicator comm(open_file_store(path), rank, 2, testing::group_options("state-test"));
    std::vector<float> weights(rank == 0 ? 10 : 11);
    TrainingState state;
    state.add("weights", tensor_view(std::span(weights)));
    try {
      state.restore(comm);
    } catch (const Error& e) {
      require(e.code() == ErrorCode::Mismatch, "{}", e.what());
      reporter.outcome("ok");
      return;
    }
    throw std::runtime_error("restore accepted different registrations");
  });
  ASSERT_TRUE(group.wait_ended({0, 1}, Clock::now() + 30s));
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(group.end(r).ok() && group.end(r).outcome == "ok") << group.end(r).describe();
}

TEST(TrainingStateAlone, KeepsTwoCommitsAndRefusesAStepTwice) {
  std::vector<double> buffer(3, 1.0);
  TrainingState state;
  state.add("buffer", tensor_view(std::span(buffer)));
  EXPECT_FALSE(state.committed_step().has_value());
  state.commit(1);
  state.commit(2);
  EXPECT_EQ(state.committed_step(), 2u);
  EXPECT_THROW(state.commit(2), Error);
  EXPECT_THROW(state.add("late", tensor_view(std::span(buffer))), Error);
}

}  // namespace
}  // namespace canopy
