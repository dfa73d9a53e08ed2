#include "bench/collectives/commands.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bench/collectives/ceiling.hpp"
#include "bench/collectives/choice.hpp"
#include "bench/collectives/compare.hpp"
#include "bench/collectives/cpu_speed.hpp"
#include "bench/collectives/plot.hpp"
#include "bench/collectives/selection.hpp"
#include "bench/collectives/trace_command.hpp"
#include "common/settings.hpp"

namespace canopy::bench {
int run_guarded(CLI::App& app, const char* name, const Command& body) {
  try {
    return body();
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "canopy-bench{}{}: {}\n", *name ? " " : "", name, e.what());
    return 1;
  }
}

namespace {

// A subcommand whose settings live as long as the parse that fills them and the command that runs.
template <typename Settings>
std::pair<CLI::App*, std::shared_ptr<Settings>> subcommand(CLI::App& app, const char* name,
                                                           const char* about) {
  return {app.add_subcommand(name, about), std::make_shared<Settings>()};
}

// Makes `run(state)` the chosen command once `sub` was parsed.
template <typename Settings, typename Run>
void when_chosen(CLI::App* sub, Command& chosen, std::shared_ptr<Settings> state, const char* name, Run run) {
  sub->callback([sub, &chosen, state, name, run] {
    chosen = [sub, state, name, run] { return run_guarded(*sub, name, [&] { return run(*state); }); };
  });
}

void add_trace(CLI::App& parent, Command& chosen) {
  auto [app, state] = subcommand<TraceSettings>(
      parent, "trace", "show a collective's schedule round by round, simulated (no network)");
  TraceSettings& s = *state;
  app->add_option("collective", s.collective, "broadcast|reduce|allreduce|allgather|reducescatter|barrier")
      ->required();
  app->add_option("--algo", s.algorithms, "algorithms: a comma-separated list or 'all'")
      ->capture_default_str();
  app->add_option("-p,--ranks", s.ranks, "number of ranks")->capture_default_str();
  app->add_option("--count", s.count, "elements (all-gather, reduce-scatter: per rank)")
      ->capture_default_str();
  app->add_option("--chunk-bytes", s.chunk_bytes, "pipelining granularity (a size: 64K, 1M)")
      ->capture_default_str();
  app->add_option("--dtype", s.dtype, "element type")->capture_default_str();
  app->add_option("--root", s.root, "root of broadcast and reduce")->capture_default_str();
  app->add_option("--alpha-us", s.alpha_us, "model: latency per message, microseconds")
      ->capture_default_str();
  app->add_option("--link-gbps", s.link_gbps, "model: link bandwidth, 10^9 bytes/s")->capture_default_str();
  app->add_option("--reduce-gbps", s.reduce_gbps, "model: reduction speed, 10^9 bytes/s")
      ->capture_default_str();
  app->add_option(
         "--eager-gbps", s.eager_gbps,
         "model: the rate of a message's first --eager-bytes (what a socket takes at once; 0: --link-gbps)")
      ->capture_default_str();
  app->add_option("--eager-bytes", s.eager_bytes, "model: how many of a message's bytes move at --eager-gbps")
      ->capture_default_str();
  app->add_option("--cores", s.cores,
                  "model: all ranks on one host with this many cores; its ranks then move at most that many "
                  "messages at once (0: every rank on a host of its own)")
      ->capture_default_str();
  app->add_option("--hosts", s.hosts,
                  "model: ranks on several hosts, 2x4 (2 hosts of 4) or 4,2,2 (ranks per host); sets -p");
  app->add_flag("--round-robin", s.round_robin,
                "with --hosts: deal the ranks to the hosts in turn, not in blocks");
  app->add_option("--between-alpha-us", s.between_alpha_us,
                  "model: latency per message between hosts (default: --alpha-us)");
  app->add_option("--between-gbps", s.between_gbps,
                  "model: a host's network link, 10^9 bytes/s, shared by its ranks (default: --link-gbps)");
  app->add_option("--svg", s.svg, "also draw the trace here (with several algorithms: FILE-<algo>.svg)");
  app->add_flag("--out-of-place", s.out_of_place,
                "the input in its own buffer: messages read straight from it show as input[a..b)");
  when_chosen(app, chosen, state, "trace", [](const TraceSettings& trace) {
    std::fputs(run_trace(trace).c_str(), stdout);
    return 0;
  });
}

struct CeilingSettings {
  std::string bytes = "64M";
  CeilingOptions options;
};

void add_ceiling(CLI::App& parent, Command& chosen) {
  auto [app, state] = subcommand<CeilingSettings>(
      parent, "ceiling",
      "how fast two processes exchange data both ways over loopback TCP, and the busbw ceiling that implies "
      "for each collective on one host");
  app->add_option("--bytes", state->bytes, "message size each way per repetition")->capture_default_str();
  app->add_option("--repetitions", state->options.repetitions, "timed repetitions (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  when_chosen(app, chosen, state, "ceiling", [](CeilingSettings s) {
    CeilingOptions& options = s.options;
    options.message_bytes = settings::parse_size("--bytes", s.bytes);
    LoopbackCeiling ceiling = measure_loopback_ceiling(options);
    fmt::print(
        "loopback exchange, 2 processes, {} each way x {}: {:.2f} GB/s each way (median; best {:.2f}), "
        "{:.2f} GB/s in all\n",
        settings::format_size(options.message_bytes), options.repetitions, ceiling.each_way_gbps,
        ceiling.best_each_way_gbps, ceiling.aggregate_gbps());
    fmt::print("{:>14} {:>9} {:>9} {:>9} {:>9}   busbw ceiling on one host (GB/s)\n", "collective", "P=2",
               "P=4", "P=8", "P=16");
    for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                         Collective::AllGather, Collective::ReduceScatter}) {
      fmt::print("{:>14}", command_name(c));
      for (int p : {2, 4, 8, 16}) fmt::print(" {:>9.3f}", ceiling_busbw_gbps(c, p, ceiling.aggregate_gbps()));
      fmt::print("\n");
    }
    return 0;
  });
}

void add_cpu(CLI::App& parent, Command& chosen) {
  auto [app, times] = subcommand<int>(
      parent, "cpu",
      "how long a fixed piece of CPU work takes now (ms); on shared machines this moves by 2-3x within "
      "seconds, and every timing with it. bench/compare/compare.sh runs it around each run");
  *times = 1;
  app->add_option("--times", *times, "how many times to time it, one line each")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  when_chosen(app, chosen, times, "cpu", [](int repeats) {
    for (int i = 0; i < repeats; ++i) fmt::print("cpu fixed work: {:.1f} ms\n", fixed_work_milliseconds());
    return 0;
  });
}

// The files of rows a command reads, concatenated.
nlohmann::ordered_json rows_of(const std::vector<std::string>& paths) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::string& path : paths)
    for (auto& row : read_rows(path)) rows.push_back(std::move(row));
  return rows;
}

struct PlotSettings {
  std::string output;
  std::vector<std::string> inputs;
};

void add_plot(CLI::App& parent, Command& chosen) {
  auto [app, state] = subcommand<PlotSettings>(
      parent, "plot",
      "draw busbw vs size per algorithm (and time vs ranks when the files span several rank counts) from "
      "--json files, with gnuplot");
  app->add_option("output", state->output, "the picture: FILE.svg or FILE.png")->required();
  app->add_option("rows", state->inputs, "canopy-bench --json files")->required();
  when_chosen(app, chosen, state, "plot", [](const PlotSettings& s) {
    const nlohmann::ordered_json rows = rows_of(s.inputs);
    draw_plot(rows, s.output);
    fmt::print("canopy-bench plot: drew {} rows into {}\n", rows.size(), s.output);
    return 0;
  });
}

struct CompareSettings {
  std::string ours, theirs, peer = "mpi";
};

void add_compare(CLI::App& parent, Command& chosen) {
  auto [app, state] = subcommand<CompareSettings>(
      parent, "compare", "Canopy's --json rows beside a peer's (same keys), with ratios");
  app->add_option("canopy", state->ours, "canopy-bench --json file")->required();
  app->add_option("peer", state->theirs, "the peer's rows (bench/compare's canopy-mpi-bench --json)")
      ->required();
  app->add_option("--peer-name", state->peer, "what to call the peer in the table")->capture_default_str();
  when_chosen(app, chosen, state, "compare", [](const CompareSettings& s) {
    std::fputs(compare_table(read_rows(s.ours), read_rows(s.theirs), s.peer).c_str(), stdout);
    return 0;
  });
}

void add_choice(CLI::App& parent, Command& chosen) {
  auto [app, inputs] = subcommand<std::vector<std::string>>(
      parent, "choice",
      "how good auto is; per size, auto's measured time beside the fastest algorithm's, from --json files of "
      "sweeps run with --algo all");
  app->add_option("rows", *inputs, "canopy-bench --json files")->required();
  when_chosen(app, chosen, inputs, "choice", [](const std::vector<std::string>& paths) {
    std::fputs(choice_table(rows_of(paths)).c_str(), stdout);
    return 0;
  });
}

}  // namespace

void add_subcommands(CLI::App& app, Command& chosen) {
  add_trace(app, chosen);
  add_ceiling(app, chosen);
  add_cpu(app, chosen);
  add_plot(app, chosen);
  add_compare(app, chosen);
  add_choice(app, chosen);
}

}  // namespace canopy::bench
