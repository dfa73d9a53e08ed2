#include "bench/collectives/report.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench/collectives/ceiling.hpp"
#include "bench/collectives/windows.hpp"

namespace canopy::bench {

namespace {

constexpr auto kColumns =
    "{:>12} {:>12} {:>8} {:>6} {:>5} {:>18} {:>10} {:>10} {:>10} {:>9} {:>10} {:>8} {:>8} {:>7}";

// The windows' spread as a percentage of the time, '!' after it where it is large (windows.hpp).
std::string spread_cell(const BenchResult& r) {
  return fmt::format("{:.0f}{}", 100 * r.spread, r.spread_is_large ? "!" : " ");
}

double ceiling_of(const RunInfo& info, Collective collective) {
  return ceiling_busbw_gbps(collective, info.ranks, 2 * info.loopback_each_way_gbps);
}

// The time the memory allows this row's call (memory_ceiling.hpp); 0 where not measured or not known.
double bound_us(const RunInfo& info, const BenchResult& r) {
  if (info.memory.cores == 0 || r.with.collective == Collective::Barrier ||
      r.with.collective == Collective::AllToAllV)
    return 0;
  const bool per_rank_block =
      r.with.collective == Collective::AllGather || r.with.collective == Collective::ReduceScatter ||
      r.with.collective == Collective::AllToAll || r.with.collective == Collective::Gather ||
      r.with.collective == Collective::Scatter;
  const std::uint64_t count = per_rank_block ? r.count / static_cast<std::uint64_t>(info.ranks) : r.count;
  const std::size_t chunk = r.with.chunk_bytes > 0 ? r.with.chunk_bytes : info.chunk_bytes;
  return 1e6 * memory_bound_seconds(r.with.collective, r.algorithm, info.ranks, count, size_of(r.with.dtype),
                                    chunk, r.with.root, r.with.in_place, info.memory, info.single_copy_bytes);
}

}  // namespace

void TablePrinter::header(Collective collective, const RunInfo& info) {
  info_ = info;
  collective_ = collective;
  const double ceiling = ceiling_of(info, collective);
  if (ceiling > 0)
    fmt::print(out_,
               "#\n# ceiling, measured now: loopback exchange {:.2f} GB/s each way, {:.2f} GB/s in all; "
               "{} on {} ranks of one host cannot pass busbw {:.3f} GB/s\n",
               info.loopback_each_way_gbps, 2 * info.loopback_each_way_gbps, command_name(collective),
               info.ranks, ceiling);
  if (info.memory.cores > 0)
    fmt::print(
        out_,
        "#\n# memory, measured now with {} cores busy: copies {:.2f} GB/s, reduces {:.2f} GB/s (all "
        "together, memory to memory); bound = the time the algorithm's copies (each message into a ring "
        "and out of it{}) and reduces take at these rates (rings in cache can beat it)\n",
        info.memory.cores, info.memory.copy_gbps, info.memory.reduce_gbps,
        info.single_copy_bytes > 0
            ? fmt::format(", or once from {} B up outside reductions: single copy", info.single_copy_bytes)
            : "");
  fmt::print(out_, "#\n# {} on {} ranks ({} host{}), transport {}; cost model: {}\n",
             command_name(collective), info.ranks, info.hosts, info.hosts == 1 ? "" : "s",
             info.transport.describe(), info.link.description);
  fmt::print(
      out_, "# timed: {}, in windows back to back; time: the median window's; min, max: the fastest and "
      "slowest rank over all windows;\n# spread: the windows' range against the time, '!' past {:.0f}%: that "
      "row's time is not to be trusted\n#\n",
      info.latency ? "one call at a time, after a barrier (--latency)" : "a stream of back-to-back calls",
      100 * kLargeSpread);
  fmt::print(out_, kColumns, "size", "count", "type", "redop", "root", "algo", "time(us)", "min(us)",
             "max(us)", "spread", "model(us)", "algbw", "busbw", "#wrong");
  const bool bound = info.memory.cores > 0;
  fmt::print(out_, "{}{}\n", ceiling > 0 ? fmt::format(" {:>7}", "ceil") : "",
             bound ? fmt::format(" {:>10} {:>7}", "bound(us)", "of it") : "");
  fmt::print(out_, kColumns, "(B)", "(elements)", "", "", "", "", "", "", "", "(%)", "", "(GB/s)", "(GB/s)",
             "");
  fmt::print(out_, "{}{}\n", ceiling > 0 ? fmt::format(" {:>7}", "(%)") : "",
             bound ? fmt::format(" {:>10} {:>7}", "", "(%)") : "");
  std::fflush(out_);
}

void TablePrinter::row(const BenchResult& r) {
  const double ceiling = ceiling_of(info_, collective_);
  fmt::print(out_,
             "{:>12} {:>12} {:>8} {:>6} {:>5} {:>18} {:>10.1f} {:>10.1f} {:>10.1f} {:>9} {:>10.1f} {:>8.3f} "
             "{:>8.3f} {:>7}",
             r.bytes, r.count, to_string(r.with.dtype), to_string(r.with.op), r.with.root, r.algorithm,
             r.time_us, r.min_time_us, r.max_time_us, spread_cell(r), r.predicted_time_us, r.algbw_gbps,
             r.busbw_gbps, r.wrong);
  const double bound = bound_us(info_, r);
  fmt::print(
      out_, "{}{}\n", ceiling > 0 ? fmt::format(" {:>7.1f}", 100 * r.busbw_gbps / ceiling) : "",
      info_.memory.cores > 0 ? fmt::format(" {:>10.1f} {:>7.1f}", bound, 100 * bound / r.time_us) : "");
  std::fflush(out_);
  busbw_sum_ += r.busbw_gbps;
  ++rows_;
  flagged_ += r.spread_is_large ? 1 : 0;
}

void TablePrinter::footer() {
  if (rows_ > 0) fmt::print(out_, "# Avg bus bandwidth    : {:.3f} GB/s\n", busbw_sum_ / rows_);
  if (flagged_ > 0)
    fmt::print(out_,
               "# {} of {} rows flagged (!): their windows differ by more than {:.0f}%; a longer --min-time "
               "or a quieter machine gives times to trust\n",
               flagged_, rows_, 100 * kLargeSpread);
  busbw_sum_ = 0;
  rows_ = 0;
  flagged_ = 0;
}

namespace {

nlohmann::ordered_json to_json(const RunInfo& info, const BenchResult& r) {
  nlohmann::ordered_json row = {
      {"collective", command_name(r.with.collective)},
      {"algo", r.algorithm},
      {"requested_algo", r.with.algorithm},
      {"bytes", r.bytes},
      {"count", r.count},
      {"dtype", std::string(to_string(r.with.dtype))},
      {"op", std::string(to_string(r.with.op))},
      {"root", r.with.root},
      {"in_place", r.with.in_place},
      {"chunk_bytes", r.with.chunk_bytes},
      {"ranks", info.ranks},
      {"hosts", info.hosts},
      {"transport", info.transport.name},
      {"requested_transport", info.transport.requested},
      {"iterations", r.iterations},
      {"windows", r.windows},
      {"timing", r.with.latency ? "latency" : "stream"},
      {"time_us", r.time_us},
      {"min_time_us", r.min_time_us},
      {"max_time_us", r.max_time_us},
      {"fastest_window_us", r.fastest_window_us},
      {"slowest_window_us", r.slowest_window_us},
      {"spread", r.spread},
      {"spread_is_large", r.spread_is_large},
      {"predicted_time_us", r.predicted_time_us},
      {"algbw_gbps", r.algbw_gbps},
      {"busbw_gbps", r.busbw_gbps},
      {"wrong", r.wrong},
      {"alpha_s", info.link.alpha_seconds},
      {"beta_s_per_byte", info.link.beta_seconds_per_byte},
      {"gamma_s_per_byte", info.link.gamma_seconds_per_byte},
      {"beta_eager_s_per_byte", info.link.beta_eager_seconds_per_byte},
      {"eager_bytes", info.link.eager_bytes},
      {"alpha_between_hosts_s", info.link.alpha_between_hosts_seconds},
      {"beta_between_hosts_s_per_byte", info.link.beta_between_hosts_seconds_per_byte}};
  const double ceiling = ceiling_busbw_gbps(r.with.collective, info.ranks, 2 * info.loopback_each_way_gbps);
  if (const double bound = bound_us(info, r); bound > 0) {
    row["memory_cores"] = info.memory.cores;
    row["memory_copy_gbps"] = info.memory.copy_gbps;
    row["memory_reduce_gbps"] = info.memory.reduce_gbps;
    row["bound_time_us"] = bound;
    row["time_of_bound"] = r.time_us / bound;
  }
  if (ceiling > 0) {
    row["loopback_each_way_gbps"] = info.loopback_each_way_gbps;
    row["ceiling_busbw_gbps"] = ceiling;
    row["busbw_of_ceiling"] = r.busbw_gbps / ceiling;
  }
  return row;
}

std::ofstream open_output(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
  return out;
}

}  // namespace

nlohmann::ordered_json results_json(const RunInfo& info, const std::vector<BenchResult>& results) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& r : results) rows.push_back(to_json(info, r));
  return rows;
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results) {
  open_output(path) << results_json(info, results).dump(2) << "\n";
}

void write_csv(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results) {
  auto out = open_output(path);
  bool first = true;
  for (const auto& r : results) {
    nlohmann::ordered_json row = to_json(info, r);
    if (first) {
      std::string header;
      for (auto it = row.begin(); it != row.end(); ++it) header += (header.empty() ? "" : ",") + it.key();
      out << header << "\n";
      first = false;
    }
    std::string line;
    for (auto it = row.begin(); it != row.end(); ++it) {
      std::string cell = it->is_string() ? it->get<std::string>() : it->dump();
      line += (line.empty() ? "" : ",") + cell;
    }
    out << line << "\n";
  }
}

}  // namespace canopy::bench
