#include "bench/collectives/plot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/deadline.hpp"
#include "common/error.hpp"

extern char** environ;

namespace canopy::bench {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A gnuplot single-quoted string: '' stands for one quote.
std::string gnuplot_string(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string terminal_for(const std::string& output, int panels) {
  int height = 360 * std::max(1, panels);
  if (ends_with(output, ".png"))
    return fmt::format("set terminal pngcairo size 960,{} enhanced font 'sans,10' background '#ffffff'",
                       height);
  return fmt::format("set terminal svg size 960,{} dynamic enhanced font 'sans,11' background '#ffffff'",
                     height);
}

struct Series {
  std::string title;
  std::map<double, double> points;  // x -> y, sorted by x
};

std::string data_of(const Series& series) {
  std::string text = fmt::format("# {}\n", series.title);
  for (const auto& [x, y] : series.points) text += fmt::format("{} {}\n", x, y);
  return text;
}

}  // namespace

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

void require_plot_tools(const std::string& path) {
  if (!ends_with(path, ".svg") && !ends_with(path, ".png"))
    fail(ErrorCode::Config, "--plot '{}': the file name must end in .svg or .png", path);
  if (find_gnuplot().empty())
    fail(ErrorCode::Config,
         "--plot needs gnuplot, which is not on PATH: install it (Debian: apt-get install gnuplot-nox), "
         "or drop --plot and keep --json / --csv to draw later with `canopy-bench plot`");
}

PlotScript plot_script(const nlohmann::ordered_json& rows, const std::string& output,
                       const std::string& data_dir) {
  // Collectives in the order they first appear; rank counts in increasing order.
  std::vector<std::string> collectives;
  std::set<int> rank_counts;
  for (const auto& row : rows) {
    std::string c = row.at("collective").get<std::string>();
    if (c == "barrier") continue;
    if (std::find(collectives.begin(), collectives.end(), c) == collectives.end()) collectives.push_back(c);
    rank_counts.insert(row.at("ranks").get<int>());
  }
  if (collectives.empty()) fail(ErrorCode::InvalidArgument, "nothing to plot: no rows with a message size");
  const bool rank_sweep = rank_counts.size() > 1;
  // With one size per collective, busbw against size is a column of dots: a rank sweep then shows only
  // time against ranks.
  auto sizes_of = [&](const std::string& collective) {
    std::set<double> sizes;
    for (const auto& row : rows)
      if (row.at("collective") == collective) sizes.insert(row.at("bytes").get<double>());
    return sizes.size();
  };
  int panels = 0;
  for (const std::string& collective : collectives)
    panels += (rank_sweep && sizes_of(collective) == 1 ? 0 : 1) + (rank_sweep ? 1 : 0);

  PlotScript plot;
  std::string& s = plot.script;
  s += terminal_for(output, panels) + "\n";
  s += fmt::format("set output {}\n", gnuplot_string(output));
  s += fmt::format("set multiplot layout {},1\n", panels);
  s += "set grid\nset key outside right top\nset style data linespoints\n";
  auto add_series = [&](const Series& series, const std::string& style) {
    std::string name = fmt::format("{}/series{}.dat", data_dir, plot.data_files.size());
    plot.data_files.emplace_back(name, data_of(series));
    return fmt::format("{} using 1:2 {} title {}", gnuplot_string(name), style, gnuplot_string(series.title));
  };

  for (const std::string& collective : collectives) {
    std::vector<std::string> plots;
    if (!rank_sweep || sizes_of(collective) > 1) {
      // busbw against size: one line per (algorithm, ranks).
      std::map<std::pair<int, std::string>, Series> by_algo;
      double ceiling = 0;
      for (const auto& row : rows) {
        if (row.at("collective") != collective) continue;
        int ranks = row.at("ranks").get<int>();
        std::string algo = row.at("algo").get<std::string>();
        Series& series = by_algo[{ranks, algo}];
        series.title = rank_sweep ? fmt::format("{} P={}", algo, ranks) : algo;
        series.points[row.at("bytes").get<double>()] = row.at("busbw_gbps").get<double>();
        if (!rank_sweep && row.contains("ceiling_busbw_gbps"))
          ceiling = row.at("ceiling_busbw_gbps").get<double>();
      }
      s += fmt::format(
          "set title {}\n",
          gnuplot_string(fmt::format("{}: bus bandwidth{}", collective,
                                     rank_sweep ? "" : fmt::format(" on {} ranks", *rank_counts.begin()))));
      s += "set logscale x 2\nset format x '%.0b%B'\nset xlabel 'message size (bytes)'\n";
      s += "set format y '%g'\nset ylabel 'busbw (GB/s)'\nset yrange [0:*]\n";
      for (const auto& [key, series] : by_algo) plots.push_back(add_series(series, ""));
      if (ceiling > 0)
        plots.push_back(fmt::format("{} with lines dashtype 2 lc rgb '#888888' title {}", ceiling,
                                    gnuplot_string(fmt::format("ceiling {:.2f} GB/s (measured)", ceiling))));
      s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
    }
    if (!rank_sweep) continue;

    // Time against P at the largest size that every rank count measured, each algorithm beside the
    // cost model's prediction (dashed, same colour).
    std::map<int, double> largest;
    for (const auto& row : rows)
      if (row.at("collective") == collective) {
        double& b = largest[row.at("ranks").get<int>()];
        b = std::max(b, row.at("bytes").get<double>());
      }
    double size = largest.begin()->second;
    for (const auto& [ranks, b] : largest) size = std::min(size, b);
    double slowest_us = 0;
    for (const auto& row : rows)
      if (row.at("collective") == collective && row.at("bytes").get<double>() == size)
        slowest_us = std::max(slowest_us, row.at("time_us").get<double>());
    const bool in_ms = slowest_us > 1e5;
    const double unit = in_ms ? 1e-3 : 1;
    std::map<std::string, std::pair<Series, Series>> by_ranks;  // algo -> (measured, predicted)
    for (const auto& row : rows) {
      if (row.at("collective") != collective || row.at("bytes").get<double>() != size) continue;
      auto& [measured, predicted] = by_ranks[row.at("algo").get<std::string>()];
      measured.title = row.at("algo").get<std::string>();
      predicted.title = measured.title + " (model)";
      const double ranks = row.at("ranks").get<double>();
      measured.points[ranks] = row.at("time_us").get<double>() * unit;
      if (row.contains("predicted_time_us"))
        predicted.points[ranks] = row.at("predicted_time_us").get<double>() * unit;
    }
    s += fmt::format(
        "set title {}\n",
        gnuplot_string(fmt::format("{}: time against the number of ranks, {:.0f} bytes", collective, size)));
    s += "unset logscale x\nset format x '%g'\nset xlabel 'ranks'\nset xtics 1\n";
    s += fmt::format("set format y '%g'\nset ylabel 'time ({})'\nset yrange [0:*]\n", in_ms ? "ms" : "us");
    plots.clear();
    int colour = 1;
    for (const auto& [algo, series] : by_ranks) {
      plots.push_back(add_series(series.first, fmt::format("lc {} pt 7", colour)));
      if (!series.second.points.empty())
        plots.push_back(add_series(series.second, fmt::format("with lines dashtype 2 lc {}", colour)));
      ++colour;
    }
    s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
    s += "set xtics autofreq\n";
  }
  s += "unset multiplot\n";
  return plot;
}

void draw_plot(const nlohmann::ordered_json& rows, const std::string& output) {
  require_plot_tools(output);
  char pattern[] = "/tmp/canopy-plot-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) fail_errno("--plot: cannot make a temporary directory");
  const std::string dir = pattern;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{dir};

  PlotScript plot = plot_script(rows, output, dir);
  for (const auto& [name, contents] : plot.data_files) std::ofstream(name) << contents;
  const std::string script = dir + "/plot.gp", errors = dir + "/gnuplot.err";
  std::ofstream(script) << plot.script;

  const std::string gnuplot = find_gnuplot();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::string arg0 = "gnuplot";
  std::string arg1 = script;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  int spawned = ::posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) fail_errno("--plot: cannot start gnuplot", spawned);
  // gnuplot draws a few hundred points in well under a second; a minute means it is stuck.
  const Deadline deadline = Deadline::after(std::chrono::seconds(60));
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      fail(ErrorCode::Timeout, "--plot: gnuplot did not finish drawing '{}' within 60 s", output);
    }
    ::usleep(10'000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::stringstream text;
    text << std::ifstream(errors).rdbuf();
    fail(ErrorCode::System, "--plot: gnuplot failed drawing '{}' (wait status {}): {}", output, status,
         text.str());
  }
}

}  // namespace canopy::bench
