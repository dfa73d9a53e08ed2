// A training loop that loses a rank and keeps training, under canopy-run --elastic:
//
//   canopy-run --nproc 4 --elastic 3:4 --max-restarts 1 ./elastic_trainer --steps 60 --step-ms 20
//
// Every step all-reduces a gradient and commits the state in memory (TrainingState). When a peer dies the
// call fails: the survivors shrink and restore the last step every one of them committed. Between steps the
// members look for a replacement waiting to join (joiners_waiting, all-reduced so that every member decides
// the same) and grow; the replacement, which canopy-run starts with CANOPY_ELASTIC_JOIN=1 (from_environment
// then joins instead of forming a group), restores the state from them and trains on.
//
// The training is exact and independent of the world size, so that a run that lost a rank ends with the
// weights of one that did not: at step s every rank contributes s * (i + 1) to weight i, and the integer
// sum over the group divided by its size is added (an average of equal values, with no rounding). After
// S steps weight i is (i + 1) * S (S + 1) / 2, which the final line compares with.
//
// One line per event on stdout, each with CLOCK_MONOTONIC seconds (the same clock in every process of a
// host: bench/elastic/recovery_probe.cpp --launcher times recoveries with it):
//   started pid P as member|replacement at T
//   step S rank R size W at T
//   shrunk to size W, restored step S at T        (a survivor)
//   grew to size W, restored step S at T          (a member that admitted a replacement)
//   joined as rank R of W, restored step S at T   (the replacement)
//   final step S digest D expected E              (D == E: the weights are the failure-free run's)
//   resumed from checkpoint step S at T           (--checkpoint-dir held one: a restarted job)
//
// --checkpoint-dir DIR --checkpoint-every N: global rank 0 writes the weights to DIR every N steps (atomically,
// include/canopy/checkpoint.hpp; straight to disk, not through the store, so that a store that is gone loses
// nothing committed), and a job started with a checkpoint there resumes from the newest: rank 0 reads it and
// broadcasts it, so that every rank starts from the same step. A restart then ends with the same weights.
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "canopy/checkpoint.hpp"
#include "canopy/training_state.hpp"

namespace {

double monotonic_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One write per line, so that lines of several ranks never interleave.
template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  const std::string line = fmt::format(format, std::forward<Args>(args)...) + "\n";
  (void)!::write(STDOUT_FILENO, line.data(), line.size());
}

// FNV-1a over the weights' bytes: equal digests, equal weights.
std::uint64_t digest_of(const std::vector<std::int64_t>& weights) {
  std::uint64_t digest = 1469598103934665603ull;
  for (std::int64_t w : weights) {
    unsigned char bytes[sizeof w];
    std::memcpy(bytes, &w, sizeof w);
    for (unsigned char b : bytes) digest = (digest ^ b) * 1099511628211ull;
  }
  return digest;
}

// The weights after `steps` steps of a run without a failure.
std::vector<std::int64_t> expected_weights(std::size_t count, std::int64_t steps) {
  std::vector<std::int64_t> weights(count);
  for (std::size_t i = 0; i < count; ++i)
    weights[i] = static_cast<std::int64_t>(i + 1) * steps * (steps + 1) / 2;
  return weights;
}

class Trainer {
 public:
  Trainer(std::size_t count, int step_ms, bool grows, std::string checkpoint_dir, int checkpoint_every)
      : weights_(count, 0),
        gradient_(count),
        step_ms_(step_ms),
        grows_(grows),
        checkpoint_dir_(std::move(checkpoint_dir)),
        checkpoint_every_(checkpoint_every) {
    state_.add("weights", canopy::tensor_view(std::span(weights_)));
    state_.add("step", canopy::tensor_view(std::span(&step_, 1)));
  }

  int run(std::int64_t steps) {
    const bool replacement = std::getenv("CANOPY_ELASTIC_JOIN") != nullptr;
    say("started pid {} as {} at {:.6f}", ::getpid(), replacement ? "replacement" : "member",
        monotonic_seconds());
    canopy::Communicator comm = canopy::Communicator::from_environment();
    if (replacement) {
      const auto restored = state_.restore(comm);
      say("joined as rank {} of {}, restored step {} at {:.6f}", comm.rank(), comm.size(),
          restored.value_or(0), monotonic_seconds());
    } else if (!checkpoint_dir_.empty()) {
      resume_from_checkpoint(comm);
    }
    while (step_ < steps) {
      try {
        train_one_step(comm);
        if (grows_) admit_replacements(comm);  // last: a replacement enters the loop at the training
      } catch (const canopy::Error& e) {
        std::fprintf(stderr, "step %lld failed, shrinking: %s\n", static_cast<long long>(step_ + 1),
                     e.what());
        comm = comm.shrink();
        const auto restored = state_.restore(comm);
        say("shrunk to size {}, restored step {} at {:.6f}", comm.size(), restored.value_or(0),
            monotonic_seconds());
      }
    }
    say("final step {} digest {:016x} expected {:016x}", step_, digest_of(weights_),
        digest_of(expected_weights(weights_.size(), steps)));
    comm.barrier();  // nobody leaves while another may still need it in the last step
    return 0;
  }

 private:
  // Rank 0 reads the newest checkpoint and broadcasts its step and weights (step 0: none there).
  void resume_from_checkpoint(canopy::Communicator& comm) {
    std::vector<std::int64_t> step{0};
    if (comm.rank() == 0) {
      if (auto latest = canopy::find_latest_checkpoint(checkpoint_dir_)) {
        if (latest->data.size() != weights_.size() * sizeof(std::int64_t))
          throw std::runtime_error(fmt::format("checkpoint {} holds {} bytes, not the {} weights of --count",
                                               latest->path, latest->data.size(), weights_.size()));
        std::memcpy(weights_.data(), latest->data.data(), latest->data.size());
        step[0] = static_cast<std::int64_t>(latest->step);
      }
    }
    comm.broadcast(std::span(step), 0);
    if (step[0] == 0) return;
    comm.broadcast(std::span(weights_), 0);
    step_ = step[0];
    state_.commit(static_cast<std::uint64_t>(step_));
    say("resumed from checkpoint step {} at {:.6f}", step_, monotonic_seconds());
  }

  void save_checkpoint(const canopy::Communicator& comm) {
    if (checkpoint_dir_.empty() || comm.rank() != 0 || step_ % checkpoint_every_ != 0) return;
    canopy::write_checkpoint_file(
        checkpoint_dir_, static_cast<std::uint64_t>(step_),
        std::string_view(reinterpret_cast<const char*>(weights_.data()), weights_.size() * sizeof(std::int64_t)),
        3);
  }

  // After a step: every member reads the count of waiting replacements, and the largest decides for all.
  void admit_replacements(canopy::Communicator& comm) {
    std::vector<std::int64_t> waiting{static_cast<std::int64_t>(comm.joiners_waiting())};
    comm.all_reduce(std::span(waiting), canopy::ReduceOp::Max);
    if (waiting[0] == 0) return;
    comm = comm.grow();
    const auto restored = state_.restore(comm);
    say("grew to size {}, restored step {} at {:.6f}", comm.size(), restored.value_or(0),
        monotonic_seconds());
  }

  void train_one_step(canopy::Communicator& comm) {
    if (step_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));  // the "compute"
    const std::int64_t s = step_ + 1;
    for (std::size_t i = 0; i < gradient_.size(); ++i) gradient_[i] = s * static_cast<std::int64_t>(i + 1);
    comm.all_reduce(std::span(gradient_));
    for (std::size_t i = 0; i < gradient_.size(); ++i) weights_[i] += gradient_[i] / comm.size();
    step_ = s;
    state_.commit(static_cast<std::uint64_t>(step_));
    save_checkpoint(comm);
    say("step {} rank {} size {} at {:.6f}", step_, comm.rank(), comm.size(), monotonic_seconds());
  }

  std::vector<std::int64_t> weights_;
  std::vector<std::int64_t> gradient_;
  std::int64_t step_ = 0;
  int step_ms_;
  bool grows_;
  std::string checkpoint_dir_;
  int checkpoint_every_;
  canopy::TrainingState state_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A training loop that shrinks when a rank dies and grows when canopy-run's replacement joins"};
  std::int64_t steps = 50;
  std::size_t count = 1024;
  int step_ms = 0;
  app.add_option("--steps", steps, "steps to train")->check(CLI::Range(1, 1000000));
  app.add_option("--count", count, "int64 weights all-reduced each step")->check(CLI::Range(1, 1 << 26));
  app.add_option("--step-ms", step_ms, "milliseconds of pretend compute per step")
      ->check(CLI::Range(0, 60000));
  bool no_grow = false;
  app.add_flag("--no-grow", no_grow, "only shrink: never admit a replacement (canopy-run then stops it at the end)");
  std::string checkpoint_dir;
  int checkpoint_every = 10;
  app.add_option("--checkpoint-dir", checkpoint_dir, "rank 0 saves the weights here; a new job resumes from them");
  app.add_option("--checkpoint-every", checkpoint_every, "steps between checkpoints")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  try {
    return Trainer(count, step_ms, !no_grow, checkpoint_dir, checkpoint_every).run(steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elastic_trainer: %s\n", e.what());
    return 1;
  }
}
