#include "bench/collectives/windows.hpp"

#include <algorithm>

namespace canopy::bench {

int windows_for(int iterations, int windows) {
  return std::max(1, std::min(windows, iterations));
}

int calls_in_window(int iterations, int windows, int window) {
  return iterations / windows + (window < iterations % windows ? 1 : 0);
}

WindowSummary summarize_windows(const std::vector<std::vector<double>>& seconds, const std::vector<int>& calls) {
  WindowSummary s;
  if (seconds.empty() || calls.empty()) return s;
  const std::size_t windows = calls.size();
  std::vector<double> window_means(windows, 0.0);
  std::vector<double> rank_means;
  double total_calls = 0;
  for (int c : calls) total_calls += c;
  for (const auto& rank : seconds) {
    double rank_seconds = 0;
    for (std::size_t w = 0; w < windows; ++w) {
      window_means[w] += rank[w] / static_cast<double>(seconds.size());
      rank_seconds += rank[w] * calls[w];
    }
    rank_means.push_back(total_calls > 0 ? rank_seconds / total_calls : 0);
  }
  s.fastest_rank = *std::min_element(rank_means.begin(), rank_means.end());
  s.slowest_rank = *std::max_element(rank_means.begin(), rank_means.end());
  for (double m : rank_means) s.mean_of_ranks += m / static_cast<double>(rank_means.size());
  s.fastest_window = *std::min_element(window_means.begin(), window_means.end());
  s.slowest_window = *std::max_element(window_means.begin(), window_means.end());
  std::sort(window_means.begin(), window_means.end());
  const std::size_t middle = windows / 2;
  s.time = windows % 2 == 1 ? window_means[middle] : (window_means[middle - 1] + window_means[middle]) / 2;
  return s;
}

}  // namespace canopy::bench
