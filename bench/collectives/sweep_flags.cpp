#include "bench/collectives/sweep_flags.hpp"

#include "common/error.hpp"
#include "common/settings.hpp"

namespace canopy::bench {

std::vector<std::uint64_t> SweepFlags::sizes() const {
  if (factor < 2) fail(ErrorCode::Config, "--stepfactor={} is out of range: use 2 or more", factor);
  const std::uint64_t max = settings::parse_size("--maxbytes", max_size);
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = settings::parse_size("--minbytes", min_size); size <= max; size *= factor) {
    sizes.push_back(size);
    if (size == 0 || size > max / factor) break;
  }
  return sizes;
}

double SweepFlags::min_time_seconds() const {
  const auto window = settings::parse_duration("--min-time", min_time, 1e-3);
  if (window > std::chrono::minutes(1))
    fail(ErrorCode::Config, "--min-time='{}' is out of range: use at most 60000 (milliseconds)", min_time);
  return std::chrono::duration<double>(window).count();
}

void add_sweep_flags(CLI::App& app, SweepFlags& flags, const std::string& collectives) {
  app.add_option("collective", flags.collective, collectives)->capture_default_str();
  app.add_option("-b,--minbytes", flags.min_size, "smallest size (8, 64K, 16M, 1G: docs/SETTINGS.md)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", flags.max_size, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", flags.factor, "size multiplication factor")->capture_default_str();
  app.add_option("-n,--iters", flags.iterations, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", flags.warmup, "untimed iterations before timing")
      ->capture_default_str();
  app.add_option(
         "--min-time", flags.min_time,
         "time each size for about this many milliseconds (or 0.2s...): at least -n iterations, and as many "
         "as the warm-up's slowest rank says fill the window (warm-up calls run slower: use -w 10 or more; "
         "0: exactly -n)")
      ->capture_default_str();
  app.add_option("--root", flags.root, "root of broadcast, reduce, gather and scatter")
      ->capture_default_str();
  app.add_flag(
      "--latency", flags.latency,
      "a barrier before every timed call, and only the calls timed (OSU's method): one call's latency, "
      "which back-to-back calls hide (a broadcast's root never waits for its leaves)");
  app.add_option("--json", flags.json, "write every row as JSON to this file");
}

}  // namespace canopy::bench
