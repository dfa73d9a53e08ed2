// canopy-host-cut-rank: one rank of bench/elastic/host-cut.sh's job, formed from the environment
// (torchrun-style variables: rank 0 hosts the store). It trains: every step an all-reduce of --count
// int64 (each rank adds its job rank + 1), then a TrainingState commit. When a call fails it shrinks,
// restores the last step every survivor committed, checks that the restored weights are exactly those of
// that step, trains --after steps more in the smaller group and checks the weights again. With
// --end-on-failure it reports the failed call instead and ends (host-cut.sh --end: how long ending takes).
//
// Lines on stdout, times in CLOCK_REALTIME seconds (the script's `date +%s.%N` is the same clock):
//   step <rank> <step> <t>                       a step committed
//   failed <rank> <t> <code> <message>           the first call that failed
//   restored <rank> <t> <step> <size>            the group it shrank to, and the step it went back to
//   recovered <rank> <t>                         the end of its first step in that group
//   done <rank> <t> ok|wrong <members> <detail>  after --after steps: whether every weight was exact
//   end <rank> <t> error <code> <message>        the shrink or the restore failed (or, with
//                                                --end-on-failure, the first call): this rank is out
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "canopy/training_state.hpp"

namespace {

double realtime_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', '|');
  return text.substr(0, 600);
}

std::string code_of(const canopy::Error& e) {
  std::string code(canopy::to_string(e.code()));
  std::replace(code.begin(), code.end(), ' ', '_');
  return code;
}

// The first element that differs from `expected`, or "" when all are equal.
std::string check(const std::vector<std::int64_t>& weights, std::int64_t expected) {
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (weights[i] != expected) return fmt::format("weight {} is {}, expected {}", i, weights[i], expected);
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one rank of host-cut.sh: train, and after a failure shrink, restore and train on"};
  int after = 50, step_ms = 20;
  std::size_t count = 1 << 16;
  double give_up_s = 60;
  bool end_on_failure = false;
  app.add_option("--count", count, "int64 all-reduced a step");
  app.add_option("--step-ms", step_ms, "pretend compute before each step");
  app.add_option("--after", after, "steps in the smaller group");
  app.add_option("--give-up", give_up_s, "seconds of training without a failure before this rank gives up");
  app.add_flag("--end-on-failure", end_on_failure, "report the first failed call and end, without a shrink");
  CLI11_PARSE(app, argc, argv);

  std::optional<canopy::Communicator> formed;
  try {
    formed.emplace(canopy::Communicator::from_environment());
  } catch (const canopy::Error& e) {
    say(fmt::format("end - {:.6f} error {} while forming: {}", realtime_seconds(), code_of(e), one_line(e.what())));
    return 2;
  }
  canopy::Communicator& comm = *formed;
  const int id = comm.rank();
  const int world = comm.size();
  std::vector<std::int64_t> weights(count, 0), gradient(count);
  std::int64_t step = 0;
  canopy::TrainingState state;
  state.add("weights", canopy::tensor_view(std::span(weights)));
  state.add("step", canopy::tensor_view(std::span(&step, 1)));
  auto train = [&](canopy::Communicator& group) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    std::fill(gradient.begin(), gradient.end(), id + 1);
    group.all_reduce(std::span(gradient));
    for (std::size_t i = 0; i < count; ++i) weights[i] += gradient[i];
    ++step;
    state.commit(static_cast<std::uint64_t>(step));
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_s);
  try {
    while (std::chrono::steady_clock::now() < give_up) {
      train(comm);
      say(fmt::format("step {} {} {:.6f}", id, step, realtime_seconds()));
    }
    say(fmt::format("end {} {:.6f} error none no call failed within {} s", id, realtime_seconds(), give_up_s));
    return 1;
  } catch (const canopy::Error& e) {
    say(fmt::format("{} {} {:.6f} {}{} {}", end_on_failure ? "end" : "failed", id, realtime_seconds(),
                    end_on_failure ? "error " : "", code_of(e), one_line(e.what())));
    if (end_on_failure) return 2;
  }
  try {
    canopy::Communicator smaller = comm.shrink();
    const std::int64_t restored = static_cast<std::int64_t>(state.restore(smaller).value_or(0));
    say(fmt::format("restored {} {:.6f} {} {}", id, realtime_seconds(), restored, smaller.size()));
    // Every step of the first group added the sum of rank + 1 over all its ranks.
    const std::string at_restore = check(weights, restored * world * (world + 1) / 2);
    const std::vector<std::int64_t> mine{id};
    std::vector<std::int64_t> members(static_cast<std::size_t>(smaller.size()));
    smaller.all_gather(std::span(mine), std::span(members));
    std::int64_t members_sum = 0;
    for (std::int64_t m : members) members_sum += m + 1;
    train(smaller);
    say(fmt::format("recovered {} {:.6f}", id, realtime_seconds()));
    for (int s = 1; s < after; ++s) train(smaller);
    const std::string at_end = check(weights, restored * world * (world + 1) / 2 + after * members_sum);
    const bool exact = at_restore.empty() && at_end.empty();
    say(fmt::format("done {} {:.6f} {} {} {}{}", id, realtime_seconds(), exact ? "ok" : "wrong",
                    fmt::join(members, ","), at_restore.empty() ? "" : "after the restore: " + at_restore,
                    at_end.empty() ? "" : " at the end: " + at_end));
    smaller.barrier();
    return exact ? 0 : 1;
  } catch (const canopy::Error& e) {
    say(fmt::format("end {} {:.6f} error {} {}", id, realtime_seconds(), code_of(e), one_line(e.what())));
    return 2;
  }
}
