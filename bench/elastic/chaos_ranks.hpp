// The ranks of one canopy-chaos-trials trial: what each process does, where the fault lands, and the
// line it reports at its end. The driver (chaos_trials.cpp) draws the plan, forks the processes and
// judges their lines.
//
// Lines, one write each (rank_processes.hpp):
//   fault <index> <seconds> <phase words>             by a rank's own thread just before it SIGKILLs it:
//                                                     where its main thread was then (all-reduce, shrink,
//                                                     ...)
//   end <index> ok <seconds> <generation> <m0,m1,..>  in a group of those process indices, every value exact
//   end <index> error <code> <seconds> <message>      a canopy::Error ended it
//   end <index> wrong <seconds> <message>             a result was not what the group's members imply
#pragma once

#include <cstdint>
#include <string>

namespace canopy::bench {

enum class Scenario {
  Collective,  // a rank dies inside back-to-back all-reduces; the others shrink
  Shrink,      // a rank revokes, everyone shrinks, and a rank dies inside that shrink
  Grow,        // a newcomer joins; a member or the newcomer dies inside the grow (or the join)
  TwoDeaths,   // a rank dies inside the all-reduces, a second one during the recovery from it
};

const char* scenario_name(Scenario scenario);

struct TrialPlan {
  Scenario scenario = Scenario::Collective;
  int members = 4;   // processes 0 .. members - 1 form the first group; Grow adds process `members`
  int victim = 0;    // the process that dies first
  int delay_us = 0;  // how far into the faulty call it dies, in microseconds (Grow's newcomer: into its join)
  int revoker = -1;  // Shrink: the rank that revokes, revoke_ms into the all-reduces
  int revoke_ms = 0;
  int second_victim = -1;  // TwoDeaths: dies second_delay_us after its first error
  int second_delay_us = 0;
  int first_fault_us = 0;        // Collective and TwoDeaths: the victim dies this far into the all-reduces
  std::uint16_t store_port = 0;  // a TcpStore on 127.0.0.1
  std::string token;
  int call_timeout_s = 10;

  int processes() const { return members + (scenario == Scenario::Grow ? 1 : 0); }
};

// Process `index` of the trial; reports its end on `report_fd` and ends the process.
[[noreturn]] void chaos_rank(const TrialPlan& plan, int index, int report_fd);

}  // namespace canopy::bench
