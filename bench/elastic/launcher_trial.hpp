// canopy-recovery-probe --launcher: one trial of the whole path a user gets from canopy-run --elastic.
// canopy-run starts --ranks copies of examples/elastic_trainer; after a random step in [5, 20) this probe
// SIGKILLs a random rank; the survivors shrink and go on, canopy-run starts a replacement, the members grow
// it in. Times come from the trainer's lines (CLOCK_MONOTONIC, the probe's clock too).
#pragma once

#include <random>
#include <string>

namespace canopy::bench {

struct LauncherTrialSettings {
  std::string canopy_run;  // the canopy-run binary
  std::string trainer;     // examples/elastic_trainer
  int ranks = 8;
  int steps = 60;
  int step_ms = 50;
  int count = 1 << 18;  // int64 weights all-reduced a step
};

struct LauncherTrialTimes {
  bool ok = false;            // canopy-run exited 0 and every rank ended with the failure-free weights
  double recovery = 0;        // kill -> the slowest survivor's first step after its shrink
  double replacement_up = 0;  // kill -> the replacement's first line (canopy-run saw the death, started it)
  double replacement_in = 0;  // the replacement's first line -> the end of its first step in the group
};

// Runs one trial and prints one line about it.
LauncherTrialTimes run_launcher_trial(const LauncherTrialSettings& settings, std::mt19937& random,
                                      int number);

}  // namespace canopy::bench
