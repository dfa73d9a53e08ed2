// Plots of benchmark rows, drawn by gnuplot (a well-kept tool; Debian's gnuplot-nox): busbw against
// message size, one line per algorithm and one panel per collective; and, when the rows span several
// rank counts, time against the rank count at the largest size measured for all of them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace canopy::bench {

// The gnuplot executable found on PATH, or "" when there is none.
std::string find_gnuplot();

// Throws canopy::Error(Config) saying how to install gnuplot when it is missing, or when `path` ends
// neither in .svg nor in .png. Called before a sweep starts, so a long run never ends without its plot.
void require_plot_tools(const std::string& path);

// The gnuplot script that draws `rows` (objects with at least collective, algo, bytes, ranks, time_us,
// busbw_gbps; ceiling_busbw_gbps draws the ceiling) into `output`, reading series from files
// `data_prefix`N.dat that write_plot_data() makes. Pure, for tests.
struct PlotScript {
  std::string script;
  std::vector<std::pair<std::string, std::string>> data_files;  // (file name, contents)
};
PlotScript plot_script(const nlohmann::ordered_json& rows, const std::string& output,
                       const std::string& data_dir);

// Draws `rows` into `output` (.svg or .png) by running gnuplot on a script and data in a temporary
// directory, removed afterwards. Throws canopy::Error with gnuplot's own message when it fails.
void draw_plot(const nlohmann::ordered_json& rows, const std::string& output);

}  // namespace canopy::bench
