#include "bench/collectives/trace_command.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "bench/collectives/selection.hpp"
#include "bench/collectives/tracer.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "common/error.hpp"
#include "common/settings.hpp"

namespace canopy::bench {
namespace {

namespace coll = canopy::collectives;

void check(const TraceSettings& s, Collective collective) {
  if (s.ranks < 1 || s.ranks > 1024)
    throw std::invalid_argument(fmt::format("-p {}: the rank count must be 1 to 1024", s.ranks));
  coll::CollectiveCall call;
  call.collective = collective;
  if (call.rooted() && (s.root < 0 || s.root >= s.ranks))
    throw std::invalid_argument(fmt::format("--root {} is not a rank of {}", s.root, s.ranks));
  if (s.count > (1u << 26))
    throw std::invalid_argument(fmt::format("--count {}: the tracer draws at most 2^26 elements", s.count));
  if (s.alpha_us < 0 || s.link_gbps <= 0 || s.reduce_gbps <= 0 || s.eager_gbps < 0 || s.cores < 0)
    throw std::invalid_argument(
        "the link model needs --alpha-us >= 0, --link-gbps > 0, --reduce-gbps > 0, --eager-gbps >= 0 and "
        "--cores >= 0");
}

coll::LinkModel link_model(const TraceSettings& s) {
  coll::LinkModel model{s.alpha_us * 1e-6, 1.0 / (s.link_gbps * 1e9), 1.0 / (s.reduce_gbps * 1e9)};
  coll::LinkCost& within = model.within_host;
  within.eager_bytes = settings::parse_size("--eager-bytes", s.eager_bytes);
  within.beta_eager = s.eager_gbps > 0 ? 1.0 / (s.eager_gbps * 1e9) : within.beta;
  model.between_hosts = within;
  if (s.between_alpha_us >= 0) model.between_hosts.alpha = s.between_alpha_us * 1e-6;
  if (s.between_gbps > 0)
    model.between_hosts.beta = model.between_hosts.beta_eager = 1.0 / (s.between_gbps * 1e9);
  return model;
}

// The ranks of each host from --hosts: "2x4" or "4,2,2".
std::vector<int> ranks_per_host(const std::string& text) {
  std::vector<int> counts;
  int hosts = 0, each = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%dx%d%c", &hosts, &each, &tail) == 2 && hosts > 0 && each > 0) {
    counts.assign(static_cast<std::size_t>(hosts), each);
    return counts;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 1024)
      throw std::invalid_argument(fmt::format("--hosts '{}' must be like 2x4 or 4,2,2", text));
    counts.push_back(static_cast<int>(n));
    start = comma + 1;
  }
  return counts;
}

// The layout the trace runs on; null for a host per rank.
std::shared_ptr<const coll::HostLayout> host_layout(const TraceSettings& s) {
  coll::HostLayout layout;
  if (!s.hosts.empty()) {
    const std::vector<int> counts = ranks_per_host(s.hosts);
    layout.cores_of_host.assign(counts.size(), s.cores > 0 ? s.cores : 1 << 10);
    if (s.round_robin) {
      // Rank r on the host whose turn it is, skipping hosts that are full.
      std::vector<int> left = counts;
      for (std::size_t host = 0; layout.host_of_rank.size() < static_cast<std::size_t>(s.ranks); ++host) {
        if (left[host % counts.size()]-- > 0)
          layout.host_of_rank.push_back(static_cast<int>(host % counts.size()));
      }
    } else {
      for (std::size_t host = 0; host < counts.size(); ++host)
        layout.host_of_rank.insert(layout.host_of_rank.end(), static_cast<std::size_t>(counts[host]),
                                   static_cast<int>(host));
    }
  } else if (s.cores > 0) {
    layout.host_of_rank.assign(static_cast<std::size_t>(s.ranks), 0);
    layout.cores_of_host = {s.cores};
  } else {
    return nullptr;
  }
  return std::make_shared<const coll::HostLayout>(std::move(layout));
}

}  // namespace

std::string svg_path_for(const std::string& path, const std::string& algorithm, bool several) {
  if (!several) return path;
  std::size_t slash = path.find_last_of('/');
  std::size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "-" + algorithm;
  return path.substr(0, dot) + "-" + algorithm + path.substr(dot);
}

std::string run_trace(const TraceSettings& settings) {
  TraceSettings s = settings;
  if (!s.hosts.empty()) {
    const std::vector<int> counts = ranks_per_host(s.hosts);
    s.ranks = std::accumulate(counts.begin(), counts.end(), 0);
  }
  auto dtype = parse_data_type(s.dtype);
  if (!dtype) throw std::invalid_argument(fmt::format("unknown --dtype '{}'", s.dtype));
  auto collectives = collectives_named(s.collective);
  if (collectives.size() != 1) throw std::invalid_argument("trace shows one collective at a time");
  const Collective collective = collectives.front();
  check(s, collective);
  const std::vector<std::string> names = algorithms_for(collective, s.algorithms, /*allow_auto=*/false);
  const std::uint64_t chunk_elements =
      std::max<std::uint64_t>(1, settings::parse_size("--chunk-bytes", s.chunk_bytes) / size_of(*dtype));

  coll::CollectiveCall call;
  call.collective = collective;
  call.size = s.ranks;
  call.count = collective == Collective::Barrier ? 0 : s.count;
  call.root = s.root;
  call.chunk_count = chunk_elements;
  call.in_place = !s.out_of_place;
  call.hosts = host_layout(s);
  const coll::LinkModel model = link_model(s);
  std::size_t buffer_bytes = 0;  // the largest buffer of any rank
  for (const coll::CollectiveCall& own : coll::every_rank(call))
    buffer_bytes =
        std::max<std::size_t>(buffer_bytes, std::max(own.data_count(), own.input_count()) * size_of(*dtype));

  std::string text = fmt::format("# model: alpha {} us per message, {} GB/s per link, reduce {} GB/s",
                                 s.alpha_us, s.link_gbps, s.reduce_gbps);
  if (model.within_host.eager_bytes > 0)
    text += fmt::format(", {} GB/s for a message's first {} B", s.eager_gbps, model.within_host.eager_bytes);
  if (s.between_alpha_us >= 0 || s.between_gbps > 0)
    text += fmt::format("; between hosts alpha {:g} us, {:g} GB/s", 1e6 * model.between_hosts.alpha,
                        1e-9 / model.between_hosts.beta);
  if (!s.hosts.empty())
    text += fmt::format("; hosts {}{}", s.hosts, s.round_robin ? ", ranks dealt round-robin" : "");
  if (s.cores > 0)
    text += s.hosts.empty() ? fmt::format(", {} ranks sharing {} cores", s.ranks, s.cores)
                            : fmt::format(", {} cores per host", s.cores);
  text += fmt::format("; {} bytes\n", buffer_bytes);
  std::vector<std::pair<std::string, double>> predictions;
  for (const std::string& name : names) {
    const coll::Algorithm& algorithm = *coll::find_algorithm(collective, name);
    // Each rank's Data, or where the input is a buffer of its own (an all-to-all's), its Input.
    std::vector<std::vector<std::byte>> inputs;
    for (const coll::CollectiveCall& own : coll::every_rank(call))
      inputs.emplace_back((own.input_in_data() ? own.data_count() : own.input_count()) * size_of(*dtype));
    coll::Simulation simulation =
        coll::simulate(algorithm, call, *dtype, ReduceOp::Sum, std::move(inputs), model);
    text += fmt::format("\n== {} {}: {}\n", command_name(collective), name, algorithm.summary);
    text += trace_text(simulation, call);
    predictions.emplace_back(name, simulation.predicted_seconds);
    if (!s.svg.empty()) {
      std::string path = svg_path_for(s.svg, name, names.size() > 1);
      std::ofstream out(path);
      out << trace_svg(simulation, call);
      if (!out) fail(ErrorCode::Config, "canopy-bench trace: cannot write the SVG file '{}'", path);
      text += fmt::format("(drawn in {})\n", path);
    }
  }
  if (predictions.size() > 1) {
    text += "\n# predicted:";
    for (const auto& [name, seconds] : predictions)
      text += fmt::format(" {} {}{}", name, format_seconds(seconds),
                          &name == &predictions.back().first ? "" : ",");
    text += "\n";
  }
  return text;
}

}  // namespace canopy::bench
