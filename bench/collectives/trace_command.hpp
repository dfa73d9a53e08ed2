// `canopy-bench trace`: the teaching view. Builds the schedules of every rank of one call, runs them in
// the simulator (no network) and prints who sends what to whom, round by round, with the model's
// predicted time; optionally draws the same as an SVG picture.
#pragma once

#include <cstdint>
#include <string>

namespace canopy::bench {

struct TraceSettings {
  std::string collective = "broadcast";
  std::string algorithms = "all";  // comma-separated list or "all"
  int ranks = 8;
  std::uint64_t count = 8;         // elements (all-gather, reduce-scatter: per rank)
  std::string chunk_bytes = "1M";  // pipelining granularity, as canopy-bench -b takes sizes
  std::string dtype = "float32";
  int root = 0;
  double alpha_us = 20;     // the link model: per-message latency,
  double link_gbps = 1;     // link bandwidth (10^9 bytes/s),
  double reduce_gbps = 10;  // and reduction speed;
  double eager_gbps = 0;    // the first eager_bytes of each message move at this rate (0: link_gbps)
  std::string eager_bytes = "0";
  int cores = 0;  // > 0: every rank on one host with this many cores (0: a host per rank);
                  // with `hosts`, the cores of each host
  // "" (every rank on one host with --cores, else a host per rank), "2x4" (2 hosts of 4 ranks) or
  // "4,2,2" (ranks per host): the layout, which sets -p; ranks fill the hosts in blocks, or by turns
  // with round_robin.
  std::string hosts;
  bool round_robin = false;
  double between_alpha_us = -1;  // links between hosts (< 0: as within)
  double between_gbps = -1;
  std::string svg;          // "": no picture; with several algorithms, one file each (name-algo.svg)
  bool out_of_place = false;  // the input as its own read-only buffer (CollectiveCall::in_place = false)
};

// The text of every requested algorithm's trace, one after another, then (for several) a one-line
// comparison of their predicted times. Writes the SVG file(s) when asked. Throws std::invalid_argument
// for a bad setting and canopy::Error when a file cannot be written.
std::string run_trace(const TraceSettings& settings);

// The SVG path for one algorithm: `path` itself for a single algorithm, else "dir/name-<algo>.svg".
std::string svg_path_for(const std::string& path, const std::string& algorithm, bool several);

}  // namespace canopy::bench
