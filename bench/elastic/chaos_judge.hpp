// Whether a canopy-chaos-trials trial passed, from the lines its processes wrote (chaos_ranks.hpp) and
// how each process ended. A trial passes when no process hung, every process that was not killed left
// its last word, and either the survivors hold one group of exactly themselves (their all-reduces were
// exact, or a rank would have said "wrong") or every one of them ended with a clear error (Revoked,
// PeerFailed, Timeout, Aborted). Only a grow's newcomer may end with a clear error while the members go
// on: a grow that the members give up leaves it out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/elastic/chaos_ranks.hpp"

namespace canopy::bench {

struct ProcessRecord {
  bool faulted = false;  // it wrote a fault line: its own thread killed it
  double fault_at = 0;
  std::string fault_phase;  // where its main thread was when it died
  bool ended = false;       // it wrote an end line
  std::string kind;         // ok, error, wrong
  std::string code;         // error: the code, one word
  double end_at = 0;
  unsigned generation = 0;  // ok: of its group
  std::string group;        // ok: the group's process indices, "0,2,3"
  std::string message;
  bool hung = false;  // still running at the bound, then killed
  int signal = 0;     // what ended it, as the parent reaped it
  int exit_code = -1;
};

struct TrialRecord {
  double start = 0;
  std::map<int, ProcessRecord> processes;
  void take(const std::string& line);  // one line of a process
};

struct TrialOutcome {
  bool passed = false;
  bool hang = false;
  std::string ending;       // what the table counts: "group of 3", "every rank: timeout", "HANG", "FAILED"
  std::string detail;       // the group, or why the trial failed
  double fault_to_end = 0;  // the first death -> the last survivor's end
  std::vector<std::string> landed;  // where each death landed, in the order they came
};

TrialOutcome judge(const TrialPlan& plan, const TrialRecord& record, double bound);

}  // namespace canopy::bench
