// A size's timed calls as several windows back to back, and what the table says of them. On a machine
// whose ranks outnumber its cores, one window of a few milliseconds measures how the scheduler happened
// to run the ranks (4 ranks on 2 cores: a 32 KiB reduce-broadcast read 650 us in one such window and
// 230 us at 256 KiB); the median window is robust to one unlucky window, and the windows' range says how
// far the time can be trusted.
#pragma once

#include <vector>

namespace canopy::bench {

// Windows a size's calls are timed in, unless --windows says otherwise.
inline constexpr int kDefaultWindows = 5;
// A spread above this share of the time is flagged in the table: the row's shape is not to be trusted.
inline constexpr double kLargeSpread = 0.25;

// How many of `iterations` calls the window `window` of `windows` times: as even as can be, the first ones
// one call longer.
int calls_in_window(int iterations, int windows, int window);
// Windows actually timed: `windows`, but never more than there are calls, and at least one.
int windows_for(int iterations, int windows);

struct WindowSummary {
  double time = 0;          // the median window's seconds per call (each window: the mean of the ranks')
  double fastest_window = 0;
  double slowest_window = 0;
  double fastest_rank = 0;  // a rank's seconds per call over all its windows
  double slowest_rank = 0;
  double mean_of_ranks = 0;
  // (slowest - fastest window) / time: how far apart repeated measurements of this size fell.
  double spread() const { return time > 0 ? (slowest_window - fastest_window) / time : 0; }
  bool spread_is_large() const { return spread() > kLargeSpread; }
};

// `seconds[r][w]`: rank r's seconds per call in window w (every rank with the same windows);
// `calls[w]`: the calls in window w.
WindowSummary summarize_windows(const std::vector<std::vector<double>>& seconds, const std::vector<int>& calls);

}  // namespace canopy::bench
