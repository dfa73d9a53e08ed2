// canopy-chaos-trials: random faults in a group that goes on, judged trial by trial.
//
//   canopy-chaos-trials --trials 30 --seed 1 [--transport tcp|auto|shm+tcp] [--ranks 4]
//                       [--scenarios collective,shrink,grow,two-deaths] [--bound 30]
//
// Each trial starts a TcpStore in a process of its own and forks the ranks (chaos_ranks.hpp), which form
// a group; a random process dies by SIGKILL at a random point of the scenario, and chaos_judge.hpp says
// whether the trial passed (a process still running --bound seconds after the start is a hang). One line
// per trial, then a table per scenario; the exit status is 1 when any trial failed.
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/elastic/chaos_judge.hpp"
#include "bench/elastic/chaos_ranks.hpp"
#include "bench/elastic/rank_processes.hpp"
#include "canopy/canopy.hpp"

namespace {

using canopy::bench::judge;
using canopy::bench::now_seconds;
using canopy::bench::ProcessRecord;
using canopy::bench::RankProcesses;
using canopy::bench::Scenario;
using canopy::bench::TrialOutcome;
using canopy::bench::TrialPlan;
using canopy::bench::TrialRecord;

// The store lives outside the ranks, so that no rank's death takes it along (the store is trusted).
class StoreProcess {
 public:
  explicit StoreProcess(const std::string& token)
      : process_(1, [token](int, int fd) {
          canopy::TcpStoreServer server("127.0.0.1", 0, token);
          canopy::bench::write_line(fd, fmt::format("port {}", server.port()));
          for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
        }) {
    const auto line = process_.next_line(now_seconds() + 10);
    if (line) std::sscanf(line->c_str(), "port %hu", &port_);
  }
  std::uint16_t port() const { return port_; }

 private:
  RankProcesses process_;  // its destructor kills the server
  std::uint16_t port_ = 0;
};

int uniform(std::mt19937& random, int low, int high) {
  return std::uniform_int_distribution<int>(low, high)(random);
}

// Where this trial's fault lands, drawn from the seed.
TrialPlan draw(Scenario scenario, int members, std::mt19937& random) {
  TrialPlan plan;
  plan.scenario = scenario;
  plan.members = members;
  plan.victim = uniform(random, 0, plan.processes() - 1);
  plan.first_fault_us = uniform(random, 0, 300000);
  switch (scenario) {
    case Scenario::Collective:
      break;
    case Scenario::Shrink:
      plan.revoker = uniform(random, 0, members - 1);
      plan.revoke_ms = uniform(random, 0, 100);
      plan.delay_us = uniform(random, 0, 10000);  // a shrink on one host takes a few ms
      break;
    case Scenario::Grow:
      // A grow takes a few ms; the newcomer's join waits first for the members to see its ticket.
      plan.delay_us = uniform(random, 0, plan.victim == members ? 60000 : 10000);
      break;
    case Scenario::TwoDeaths:
      do plan.second_victim = uniform(random, 0, members - 1);
      while (plan.second_victim == plan.victim);
      plan.second_delay_us = uniform(random, 0, 20000);
      break;
  }
  return plan;
}

std::string describe(const TrialPlan& plan) {
  const std::string who = plan.victim == plan.members ? "the newcomer" : fmt::format("rank {}", plan.victim);
  switch (plan.scenario) {
    case Scenario::Collective:
      return fmt::format("rank {} dies {:.1f} ms into the all-reduces", plan.victim,
                         plan.first_fault_us / 1e3);
    case Scenario::Shrink:
      return fmt::format("rank {} revokes at {} ms; rank {} dies {:.1f} ms into the shrink", plan.revoker,
                         plan.revoke_ms, plan.victim, plan.delay_us / 1e3);
    case Scenario::Grow:
      return fmt::format("{} dies {:.1f} ms into the {}", who, plan.delay_us / 1e3,
                         plan.victim == plan.members ? "join" : "grow");
    case Scenario::TwoDeaths:
      return fmt::format("rank {} dies {:.1f} ms into the all-reduces, rank {} {:.1f} ms into its recovery",
                         plan.victim, plan.first_fault_us / 1e3, plan.second_victim,
                         plan.second_delay_us / 1e3);
  }
  return "";
}

TrialOutcome run_trial(const TrialPlan& given, double bound) {
  TrialPlan plan = given;
  plan.token = fmt::format("chaos-{}", ::getpid());
  StoreProcess store(plan.token);
  if (store.port() == 0) {
    TrialOutcome failed;
    failed.ending = "FAILED";
    failed.detail = "the store process did not start";
    return failed;
  }
  plan.store_port = store.port();
  TrialRecord record;
  record.start = now_seconds();
  RankProcesses ranks(plan.processes(),
                      [&plan](int index, int fd) { canopy::bench::chaos_rank(plan, index, fd); });
  while (auto line = ranks.next_line(record.start + bound)) record.take(*line);
  const std::vector<int> hung = ranks.reap(record.start + bound);
  for (int index = 0; index < plan.processes(); ++index) {
    ProcessRecord& process = record.processes[index];
    process.hung = std::find(hung.begin(), hung.end(), index) != hung.end();
    process.signal = ranks.signal_of(index);
    process.exit_code = ranks.exit_code_of(index);
  }
  return judge(plan, record, bound);
}

struct Tally {
  int trials = 0, hangs = 0;
  std::map<std::string, int> endings;
  std::map<std::string, int> landed;
  std::vector<double> times;
};

std::string table_row(const std::string& scenario, Tally& tally) {
  std::sort(tally.times.begin(), tally.times.end());
  std::string endings;
  for (const auto& [ending, count] : tally.endings)
    endings += fmt::format("{}{} {}", endings.empty() ? "" : ", ", count, ending);
  std::string landed;
  for (const auto& [where, count] : tally.landed)
    landed += fmt::format("{}{} {}", landed.empty() ? "" : ", ", count, where);
  const double median = tally.times.empty() ? 0 : tally.times[tally.times.size() / 2];
  const double worst = tally.times.empty() ? 0 : tally.times.back();
  return fmt::format("| {} | {} | {} | {} | {:.3f} / {:.3f} | {} |", scenario, tally.trials, landed, endings,
                     median, worst, tally.hangs);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "random SIGKILLs inside collectives, shrinks and grows: every trial must end in a valid group or clear "
      "errors"};
  int ranks = 4, trials = 30, call_timeout = 10;
  double bound = 30;
  unsigned seed = 1;
  std::string transport = "tcp";
  std::vector<std::string> scenarios{"collective", "shrink", "grow", "two-deaths"};
  app.add_option("--ranks", ranks, "processes in the first group")->check(CLI::Range(3, 16));
  app.add_option("--trials", trials, "trials per scenario")->check(CLI::Range(1, 10000));
  app.add_option("--seed", seed, "of the victims and the moments they die")->capture_default_str();
  app.add_option("--transport", transport, "CANOPY_TRANSPORT for the ranks")
      ->check(CLI::IsMember({"tcp", "auto", "shm+tcp"}))
      ->capture_default_str();
  app.add_option("--scenarios", scenarios, "which scenarios, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"collective", "shrink", "grow", "two-deaths"}));
  app.add_option("--bound", bound, "seconds a trial may take before a process still running is a hang")
      ->capture_default_str();
  app.add_option("--call-timeout", call_timeout, "seconds every call may take (CommunicatorOptions::timeout)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::setenv("CANOPY_TRANSPORT", transport.c_str(), 1);
  ::setenv("CANOPY_SOCKET_IFNAME", "lo", 0);
  // A quick heartbeat, unless the environment sets one: a survivor that waits on the heartbeat waits this
  // long.
  ::setenv("CANOPY_HEARTBEAT_SECONDS", "0.1", 0);
  ::setenv("CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "1.5", 0);
  ::setenv("CANOPY_DEBUG", "ERROR", 0);  // each trial's warnings would bury its line
  fmt::print(
      "# canopy-chaos-trials: {} ranks, {} trials per scenario, transport {}, seed {}, heartbeat {} s / "
      "timeout {} s, calls {} s, a hang after {} s\n",
      ranks, trials, transport, seed, std::getenv("CANOPY_HEARTBEAT_SECONDS"),
      std::getenv("CANOPY_HEARTBEAT_TIMEOUT_SECONDS"), call_timeout, bound);
  std::mt19937 random(seed);
  std::vector<std::pair<std::string, Tally>> tallies;
  bool all_passed = true;
  for (const std::string& name : scenarios) {
    const Scenario scenario = name == "collective" ? Scenario::Collective
                              : name == "shrink"   ? Scenario::Shrink
                              : name == "grow"     ? Scenario::Grow
                                                   : Scenario::TwoDeaths;
    Tally tally;
    for (int t = 1; t <= trials; ++t) {
      TrialPlan plan = draw(scenario, ranks, random);
      plan.call_timeout_s = call_timeout;
      const TrialOutcome outcome = run_trial(plan, bound);
      ++tally.trials;
      ++tally.endings[outcome.ending];
      if (outcome.hang) ++tally.hangs;
      if (outcome.passed) tally.times.push_back(outcome.fault_to_end);
      std::string where;
      for (const std::string& w : outcome.landed) {
        ++tally.landed[w];
        where += (where.empty() ? "" : ", then ") + w;
      }
      all_passed = all_passed && outcome.passed;
      fmt::print("{} {}: {} (died in: {}) -> {} {}; {:.3f} s from the fault to the end\n", name, t,
                 describe(plan), where, outcome.ending, outcome.detail, outcome.fault_to_end);
      std::fflush(stdout);
    }
    tallies.emplace_back(name, std::move(tally));
  }
  fmt::print(
      "\n| scenario | trials | where the deaths landed | how the trials ended | fault -> last survivor's "
      "end, "
      "median / worst (s) | hangs |\n|---|---|---|---|---|---|\n");
  for (auto& [name, tally] : tallies) fmt::print("{}\n", table_row(name, tally));
  fmt::print("{}\n", all_passed ? "# every trial passed" : "# SOME TRIALS FAILED");
  return all_passed ? 0 : 1;
}
