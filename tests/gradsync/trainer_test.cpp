// The seed's claims about data-parallel training, made executable: the real canopy-run runs the real
// example trainer (examples/mlp_trainer.cpp) and the final weights are compared byte for byte.
//   equivalence_large_batch: N ranks x batch B with averaging == 1 rank x batch N*B
//   accumulation:            k no-sync micro-steps of batch B == one step of batch k*B (and no communication)
//   replicas_identical:      every rank holds the same weights after every step
//   kill_and_resume:         a rank killed mid-training under --max-restarts 1 resumes from the newest
//                            checkpoint and ends with the weights of an uninterrupted run
// "Exactly" holds for the integer configuration (zero-initialised linear model, integer data, power-of-two
// batches and learning rate: every intermediate is an exact float64); the MLP on random data is compared
// within a float64 tolerance, since the all-reduce adds the per-rank sums in another order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::CommandResult;
using testing::read_file;

const std::vector<std::string> kExact{"--layers", "6,1",   "--data",  "integer", "--zero-init",
                                      "--lr",     "0.125", "--steps", "6"};
const std::vector<std::string> kMlp{
    "--layers", "8,48,48,4",          "--data", "random", "--lr", "0.05", "--bucket-kib",
    "8",        "--first-bucket-kib", "2"};

std::vector<double> as_doubles(const std::string& bytes) {
  std::vector<double> values(bytes.size() / sizeof(double));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  return values;
}

class Trainer {
 public:
  // Runs mlp_trainer on `ranks` local ranks; returns the weights global rank 0 wrote.
  std::string run(int ranks, std::vector<std::string> args, const std::string& tag, int max_restarts = 0) {
    std::string out = dir_.path() + "/" + tag + ".bin";
    std::vector<std::string> argv{CANOPY_RUN_PATH, "--nproc", std::to_string(ranks)};
    if (max_restarts > 0) argv.insert(argv.end(), {"--max-restarts", std::to_string(max_restarts)});
    argv.push_back(MLP_TRAINER_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", out});
    last_ = testing::run_command(argv, {{"CANOPY_CALIBRATE", "0"}, {"CANOPY_TIMEOUT", "30"}},
                                 std::chrono::seconds(90));
    EXPECT_EQ(last_.exit_code, 0) << tag << ": " << last_.describe();
    std::string weights = read_file(out);
    EXPECT_FALSE(weights.empty()) << tag << ": no weights written";
    return weights;
  }
  const CommandResult& last() const { return last_; }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  testing::TempDir dir_;
  CommandResult last_;
};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

void expect_trained(const std::string& weights) {
  bool moved = false;
  for (double w : as_doubles(weights)) moved = moved || w != 0.0;
  EXPECT_TRUE(moved) << "the weights never left zero: nothing was trained";
}

void expect_close(const std::string& a, const std::string& b, double tolerance) {
  std::vector<double> x = as_doubles(a), y = as_doubles(b);
  ASSERT_EQ(x.size(), y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i])));
  EXPECT_LE(worst, tolerance);
  EXPECT_NE(a, std::string(a.size(), '\0'));
}

TEST(GradSyncTrainer, equivalence_large_batch) {
  Trainer trainer;
  // Exact: 4 ranks x 2 samples == 1 rank x 8 samples, bit for bit.
  std::string four = trainer.run(4, with(kExact, {"--batch", "2"}), "exact4");
  std::string one = trainer.run(1, with(kExact, {"--batch", "8"}), "exact1");
  expect_trained(one);
  EXPECT_EQ(four, one) << "4 x 2 and 1 x 8 differ in the exact configuration";
  // A 3-layer MLP in several buckets, ranks starting from different weights (broadcast_parameters), 3 ranks.
  std::string three = trainer.run(3, with(kMlp, {"--batch", "4", "--steps", "12"}), "mlp3");
  EXPECT_NE(trainer.last().out.find("buckets"), std::string::npos);
  std::string single = trainer.run(1, with(kMlp, {"--batch", "12", "--steps", "12"}), "mlp1");
  expect_close(three, single, 1e-12);
}

TEST(GradSyncTrainer, accumulation) {
  Trainer trainer;
  // 2 ranks x 4 micro-steps of 2 samples == 1 rank x 1 step of 16 samples.
  std::string accumulated = trainer.run(2, with(kExact, {"--batch", "2", "--accumulate", "4"}), "acc");
  EXPECT_NE(trainer.last().out.find("synced steps 6, skipped micro-steps 18"), std::string::npos)
      << "no-sync micro-steps communicated:\n"
      << trainer.last().out;
  std::string large = trainer.run(1, with(kExact, {"--batch", "16"}), "large");
  expect_trained(large);
  EXPECT_EQ(accumulated, large);
}

TEST(GradSyncTrainer, replicas_identical) {
  Trainer trainer;
  std::string out_dir = trainer.path("replicas");
  std::filesystem::create_directory(out_dir);
  // --check-replicas fails the job when any rank's weights differ after any step.
  trainer.run(4,
              with(kMlp, {"--batch", "3", "--steps", "12", "--check-replicas", "--rebuild-buckets",
                          "--out-dir", out_dir}),
              "rep");
  std::string first = read_file(out_dir + "/weights.rank0.bin");
  ASSERT_FALSE(first.empty());
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(read_file(out_dir + "/weights.rank" + std::to_string(r) + ".bin"), first) << "rank " << r;
}

TEST(GradSyncTrainer, kill_and_resume) {
  Trainer trainer;
  std::vector<std::string> args = with(kMlp, {"--batch", "2", "--steps", "10", "--checkpoint-every", "3"});
  std::string uninterrupted =
      trainer.run(4, with(args, {"--checkpoint-dir", trainer.path("ckpt-a")}), "plain");
  std::string resumed = trainer.run(
      4, with(args, {"--checkpoint-dir", trainer.path("ckpt-b"), "--fail-at-step", "5", "--fail-rank", "2"}),
      "killed",
      /*max_restarts=*/1);
  const std::string& out = trainer.last().out;
  EXPECT_NE(out.find("failing on purpose after step 5"), std::string::npos) << out;
  EXPECT_NE(out.find("attempt 1: resuming from"), std::string::npos) << out;
  EXPECT_NE(out.find("(step 3)"), std::string::npos) << out;
  // canopy-run reports the first failure it sees: the killed rank, or a survivor that noticed first.
  const std::string& err = trainer.last().err;
  EXPECT_TRUE(err.find("was killed by signal 9") != std::string::npos ||
              err.find("exited with status 1") != std::string::npos)
      << err;
  EXPECT_NE(err.find("restarting all ranks (restart 1 of 1)"), std::string::npos) << err;
  EXPECT_EQ(resumed, uninterrupted) << "the resumed run ended with other weights";
}

}  // namespace
}  // namespace canopy
