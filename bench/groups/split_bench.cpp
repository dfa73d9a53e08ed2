// canopy-split-bench: how long forming the group and splitting it take, run under a launcher:
//
//   canopy-run --nproc 64 canopy-split-bench --groups 4,8 --repeat 3
//
// Prints, per group size, the time of Communicator::split on the slowest rank (every rank starts it
// after a barrier, so this is the time until the last member's group is ready), of the first barrier on
// the new group (which makes its connections) and of the second (which finds them made: the most a group
// sharing its parent's sockets could save is the difference); and once, the time of forming the group
// itself (from_environment).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <vector>

#include "canopy/canopy.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The largest of every rank's value.
double slowest(canopy::Communicator& comm, double mine) {
  std::vector<double> value{mine};
  comm.all_reduce(std::span(value), canopy::ReduceOp::Max);
  return value[0];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> groups{4, 8};
  int repeat = 3;
  CLI::App app{"canopy-split-bench: the time of forming a group and of splitting it into groups of g ranks"};
  app.add_option("--groups", groups, "group sizes to split into")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", repeat, "splits per group size (the median is printed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto start = Clock::now();
    canopy::Communicator world = canopy::Communicator::from_environment();
    const double formed = slowest(world, seconds_since(start));
    if (world.rank() == 0)
      fmt::print(
          "# {} ranks ({} on this host): group formed in {:.1f} ms (slowest rank; with the start-up probe "
          "unless "
          "CANOPY_CALIBRATE=0)\n",
          world.size(), world.local_size(), formed * 1e3);
    for (int g : groups) {
      std::vector<double> splits, barriers, second_barriers;
      for (int i = 0; i < repeat; ++i) {
        world.barrier();
        const auto split_start = Clock::now();
        canopy::Communicator group = world.split(world.rank() / g);
        const double split = seconds_since(split_start);
        const auto barrier_start = Clock::now();
        group.barrier();
        const double barrier = seconds_since(barrier_start);
        const auto second_start = Clock::now();
        group.barrier();
        const double second = seconds_since(second_start);
        splits.push_back(slowest(world, split));
        barriers.push_back(slowest(world, barrier));
        second_barriers.push_back(slowest(world, second));
      }
      if (world.rank() == 0)
        fmt::print(
            "split into groups of {:>3}: {:8.2f} ms   first barrier in the group: {:6.3f} ms   second: "
            "{:6.3f} ms   (median of {})\n",
            g, median(splits) * 1e3, median(barriers) * 1e3, median(second_barriers) * 1e3, repeat);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-split-bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
