// canopy-recovery-probe: how long survivors take to go on after a rank is SIGKILLed, in a training loop
// that commits its state every step (TrainingState) and, on a failure, shrinks and restores.
//
//   canopy-recovery-probe --ranks 8 --trials 5 [--transport tcp|auto] [--floats 262144]
//   canopy-recovery-probe --launcher --ranks 8 --trials 5      (canopy-run --elastic: launcher_trial.hpp)
//
// Each trial forks --ranks processes that meet through a FileStore in a fresh directory and train:
// an all-reduce of --floats floats, then a commit. After a random step in [5, 20) of the first life, this
// process SIGKILLs a random rank, noting the time; every survivor reports when its first step after the
// shrink and restore has ended. Recovery is the slowest survivor's time from the kill to that end; all
// survivors must hold the same restored step and weights. One line per trial, then the median.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/elastic/launcher_trial.hpp"
#include "bench/elastic/rank_processes.hpp"
#include "canopy/canopy.hpp"
#include "canopy/training_state.hpp"

namespace {

using canopy::bench::now_seconds;
using canopy::bench::write_line;

// One rank's life: train, and after a failure shrink, restore and train one step more.
[[noreturn]] void rank_main(int rank, int ranks, const std::string& store_dir, std::size_t floats,
                            int report_fd) {
  try {
    canopy::CommunicatorOptions options;
    options.job_token = "recovery-probe";
    canopy::Communicator comm(canopy::open_file_store(store_dir), rank, ranks, options);
    std::vector<float> weights(floats, 0.0f), gradient(floats);
    std::int64_t step = 0;
    canopy::TrainingState state;
    state.add("weights", canopy::tensor_view(std::span(weights)));
    state.add("step", canopy::tensor_view(std::span(&step, 1)));
    auto train = [&](canopy::Communicator& group) {
      std::fill(gradient.begin(), gradient.end(), static_cast<float>(group.rank() + 1));
      group.all_reduce(std::span(gradient));
      for (std::size_t i = 0; i < floats; ++i) weights[i] += gradient[i] * 1e-3f;
      ++step;
      state.commit(static_cast<std::uint64_t>(step));
    };
    try {
      for (;;) {
        train(comm);
        write_line(report_fd, fmt::format("{} {} {:.6f}", rank, step, now_seconds()));
      }
    } catch (const canopy::Error&) {
    }
    canopy::Communicator smaller = comm.shrink();
    const auto restored = state.restore(smaller);
    train(smaller);
    std::uint64_t digest = 1469598103934665603ull;
    for (float w : weights) digest = (digest ^ static_cast<std::uint64_t>(w * 1e3f)) * 1099511628211ull;
    write_line(report_fd, fmt::format("{} -1 {:.6f} {} {}", rank, now_seconds(), digest,
                                      restored ? static_cast<long long>(*restored) : -1LL));
    smaller.barrier();
    std::_Exit(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    std::_Exit(1);
  }
}

// One trial; returns the recovery seconds, or a negative number naming why it failed.
double trial(int ranks, std::size_t floats, std::mt19937& random, int number) {
  char pattern[] = "/tmp/canopy-recovery-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  auto processes = std::make_unique<canopy::bench::RankProcesses>(
      ranks, [&](int r, int report_fd) { rank_main(r, ranks, dir, floats, report_fd); });
  const int victim = std::uniform_int_distribution<int>(0, ranks - 1)(random);
  const int kill_after = std::uniform_int_distribution<int>(5, 19)(random);
  double killed_at = 0;
  double recovered_at = 0;
  int recovered = 0;
  std::vector<std::uint64_t> digests;
  std::vector<int> restored_steps;
  const double give_up = now_seconds() + 60;
  while (recovered < ranks - 1) {
    const std::optional<std::string> line = processes->next_line(give_up);
    if (!line) break;
    int rank = -1, step = 0;
    double at = 0;
    unsigned long long digest = 0;
    long long restored = -1;
    const int fields = std::sscanf(line->c_str(), "%d %d %lf %llu %lld", &rank, &step, &at, &digest, &restored);
    if (fields >= 3 && step == kill_after && rank == victim && killed_at == 0) {
      processes->kill(victim, SIGKILL);
      killed_at = now_seconds();
    }
    if (fields == 5 && step == -1) {
      ++recovered;
      recovered_at = std::max(recovered_at, at);
      digests.push_back(digest);
      restored_steps.push_back(static_cast<int>(restored));
    }
  }
  processes.reset();  // the survivors have ended; anything left is stuck, and is killed
  std::filesystem::remove_all(dir);
  const bool alike = !digests.empty() && std::all_of(digests.begin(), digests.end(), [&](std::uint64_t d) {
    return d == digests[0];
  }) && std::all_of(restored_steps.begin(), restored_steps.end(), [&](int s) {
    return s == restored_steps[0];
  });
  const double seconds = recovered_at - killed_at;
  fmt::print(
      "trial {}: rank {} killed after step {}; {} of {} survivors went on; restored step {}; {}; "
      "recovery {:.3f} s\n",
      number, victim, kill_after, recovered, ranks - 1, restored_steps.empty() ? -1 : restored_steps[0],
      alike ? "same weights on every survivor" : "SURVIVORS DIFFER", seconds);
  if (recovered != ranks - 1 || !alike || killed_at == 0) return -1;
  return seconds;
}

// The directory this binary is in, where canopy-run and elastic_trainer are built beside it.
std::string own_directory() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error).parent_path().string();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// --launcher: the trials through canopy-run --elastic, and the medians of their three times.
int launcher_trials(const canopy::bench::LauncherTrialSettings& settings, int trials, std::mt19937& random) {
  fmt::print(
      "# canopy-recovery-probe --launcher: {} ranks under {} --elastic {}:{}, {} steps of {} ms, {} int64 "
      "a step\n",
      settings.ranks, settings.canopy_run, settings.ranks - 1, settings.ranks, settings.steps,
      settings.step_ms, settings.count);
  std::vector<double> recovery, up, in;
  int failed = 0;
  for (int t = 1; t <= trials; ++t) {
    const canopy::bench::LauncherTrialTimes times = canopy::bench::run_launcher_trial(settings, random, t);
    if (!times.ok) {
      ++failed;
      continue;
    }
    recovery.push_back(times.recovery);
    up.push_back(times.replacement_up);
    in.push_back(times.replacement_in);
  }
  fmt::print(
      "# medians of {} trials ({} failed): kill -> survivors' next step {:.3f} s; kill -> replacement "
      "started {:.3f} s; replacement start -> its first step {:.3f} s\n",
      recovery.size(), failed, median(recovery), median(up), median(in));
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "time from a SIGKILLed rank to the survivors' next step (shrink, then TrainingState::restore)"};
  int ranks = 8, trials = 5;
  std::size_t floats = 1 << 18;
  std::string transport = "tcp";
  unsigned seed = std::random_device{}();
  app.add_option("--ranks", ranks, "processes in each trial")->check(CLI::Range(3, 64));
  app.add_option("--trials", trials, "trials")->check(CLI::Range(1, 1000));
  app.add_option("--floats", floats, "all-reduced per step");
  app.add_option("--transport", transport, "CANOPY_TRANSPORT for the ranks")
      ->check(CLI::IsMember({"tcp", "auto"}));
  app.add_option("--seed", seed, "of the victims and the steps they die after");
  bool launcher = false;
  canopy::bench::LauncherTrialSettings through;
  through.canopy_run = own_directory() + "/canopy-run";
  through.trainer = own_directory() + "/elastic_trainer";
  app.add_flag("--launcher", launcher,
               "run elastic_trainer under canopy-run --elastic instead: the replacement's join timed too");
  app.add_option("--canopy-run", through.canopy_run, "--launcher: the canopy-run binary")
      ->capture_default_str();
  app.add_option("--trainer", through.trainer, "--launcher: the elastic_trainer binary")
      ->capture_default_str();
  app.add_option("--steps", through.steps, "--launcher: steps in each trial")->check(CLI::Range(25, 100000));
  app.add_option("--step-ms", through.step_ms, "--launcher: pretend compute per step");
  CLI11_PARSE(app, argc, argv);
  ::setenv("CANOPY_SOCKET_IFNAME", "lo", 0);
  std::mt19937 random(seed);
  if (launcher) {
    through.ranks = ranks;
    through.count = static_cast<int>(floats);
    if (transport != "auto") ::setenv("CANOPY_TRANSPORT", transport.c_str(), 1);
    return launcher_trials(through, trials, random);
  }
  ::setenv("CANOPY_TRANSPORT", transport.c_str(), 1);
  fmt::print("# canopy-recovery-probe: {} ranks, {} floats a step, transport {}, seed {}\n", ranks, floats,
             transport, seed);
  std::vector<double> times;
  int failed = 0;
  for (int t = 1; t <= trials; ++t) {
    const double seconds = trial(ranks, floats, random, t);
    if (seconds < 0)
      ++failed;
    else
      times.push_back(seconds);
  }
  std::sort(times.begin(), times.end());
  if (!times.empty())
    fmt::print("# recovery: median {:.3f} s, min {:.3f}, max {:.3f} ({} trials, {} failed)\n",
               times[times.size() / 2], times.front(), times.back(), times.size(), failed);
  return failed == 0 ? 0 : 1;
}
