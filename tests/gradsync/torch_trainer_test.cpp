// The libtorch example trainer (examples/torch_trainer.cpp) under the real canopy-run: gradients reach the
// synchronizer through autograd hooks, so these tests check the glue a PyTorch C++ user writes.
//   replicas_identical_and_loss_decreases: every rank holds the same parameters after every step (with
//                            accumulation and several buckets), and training lowers a held-out loss
//   equivalence_large_batch: 4 ranks x batch 2 end where 1 rank x batch 8 ends (float32 tolerance: the
//                            gradients are averaged, not summed, and no hook is lost or counted twice)
//   kill_and_resume:         a rank killed mid-training under --max-restarts 1 resumes from the newest
//                            checkpoint and ends with exactly the parameters of an uninterrupted run
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::CommandResult;

// Three buckets for the default model (16 -> 256 -> 256 -> 4): the last layer, the middle one, the first.
const std::vector<std::string> kBase{"--bucket-kib", "64", "--first-bucket-kib", "16", "--lr", "0.2"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

std::vector<float> read_floats(const std::string& path) {
  std::string bytes = testing::read_file(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

class TorchTrainer {
 public:
  // Runs torch_trainer on `ranks` local ranks; returns the parameters global rank 0 wrote.
  std::vector<float> run(int ranks, std::vector<std::string> args, const std::string& tag,
                         int max_restarts = 0) {
    std::string out = dir_.path() + "/" + tag + ".bin";
    std::vector<std::string> argv{CANOPY_RUN_PATH, "--nproc", std::to_string(ranks)};
    if (max_restarts > 0) argv.insert(argv.end(), {"--max-restarts", std::to_string(max_restarts)});
    argv.push_back(TORCH_TRAINER_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", out});
    last_ = testing::run_command(argv, {{"CANOPY_CALIBRATE", "0"}, {"CANOPY_TIMEOUT", "60"}},
                                 std::chrono::seconds(150));
    EXPECT_EQ(last_.exit_code, 0) << tag << ": " << last_.describe();
    std::vector<float> parameters = read_floats(out);
    EXPECT_FALSE(parameters.empty()) << tag << ": no parameters written";
    return parameters;
  }
  const CommandResult& last() const { return last_; }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  testing::TempDir dir_;
  CommandResult last_;
};

// The held-out losses global rank 0 prints at start and at the end.
std::pair<double, double> held_out_losses(const std::string& out) {
  std::regex start(R"(held-out loss ([0-9.]+))"), end(R"(done: held-out loss ([0-9.]+))");
  std::smatch first, last;
  EXPECT_TRUE(std::regex_search(out, first, start)) << out;
  EXPECT_TRUE(std::regex_search(out, last, end)) << out;
  if (first.empty() || last.empty()) return {0, 0};
  return {std::stod(first[1]), std::stod(last[1])};
}

TEST(TorchTrainer, replicas_identical_and_loss_decreases) {
  TorchTrainer trainer;
  // --check-replicas makes the job fail when any rank's parameters differ from rank 0's after any step.
  // The two weight matrices (16 and 256 KiB) are all-reduced in place, while autograd goes on.
  trainer.run(4,
              with(kBase, {"--batch", "4", "--accumulate", "2", "--steps", "40", "--check-replicas",
                           "--in-place-kib", "16"}),
              "replicas");
  const std::string& out = trainer.last().out;
  EXPECT_NE(out.find("6 parameters in 4 buckets"), std::string::npos) << out;
  EXPECT_NE(out.find("synced steps 40, skipped micro-steps 40, bucket all-reduces 160"), std::string::npos)
      << out;
  auto [before, after] = held_out_losses(out);
  EXPECT_LT(after, 0.9 * before) << "training did not lower the held-out loss:\n" << out;
}

TEST(TorchTrainer, equivalence_large_batch) {
  TorchTrainer trainer;
  std::vector<float> four =
      trainer.run(4, with(kBase, {"--batch", "2", "--steps", "10", "--in-place-kib", "16"}), "four");
  std::vector<float> one = trainer.run(1, with(kBase, {"--batch", "8", "--steps", "10"}), "one");
  ASSERT_EQ(four.size(), one.size());
  // Both start from rank 0's initial parameters (seed 1000); measure how far training moved them, so that
  // the tolerance is small against the movement.
  std::vector<float> initial = trainer.run(1, with(kBase, {"--steps", "0"}), "initial");
  ASSERT_EQ(initial.size(), one.size());
  double worst = 0, moved = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(four[i] - one[i])));
    moved = std::max(moved, static_cast<double>(std::abs(one[i] - initial[i])));
  }
  EXPECT_GT(moved, 1e-2) << "training hardly moved the parameters";
  EXPECT_LT(worst, 1e-5) << "4 x 2 and 1 x 8 differ by up to " << worst << " (training moved them " << moved
                         << ")";
}

TEST(TorchTrainer, kill_and_resume) {
  TorchTrainer trainer;
  std::vector<std::string> args = with(kBase, {"--batch", "2", "--steps", "10", "--checkpoint-every", "3"});
  std::vector<float> uninterrupted =
      trainer.run(3, with(args, {"--checkpoint-dir", trainer.path("ckpt-a")}), "plain");
  std::vector<float> resumed = trainer.run(
      3, with(args, {"--checkpoint-dir", trainer.path("ckpt-b"), "--fail-at-step", "5", "--fail-rank", "2"}),
      "killed", /*max_restarts=*/1);
  const std::string& out = trainer.last().out;
  EXPECT_NE(out.find("failing on purpose after step 5"), std::string::npos) << out;
  EXPECT_NE(out.find("attempt 1: resuming from"), std::string::npos) << out;
  EXPECT_NE(out.find("(step 3)"), std::string::npos) << out;
  EXPECT_NE(trainer.last().err.find("restarting all ranks (restart 1 of 1)"), std::string::npos)
      << trainer.last().err;
  EXPECT_TRUE(resumed == uninterrupted) << "the resumed run ended with other parameters";
}

}  // namespace
}  // namespace canopy
