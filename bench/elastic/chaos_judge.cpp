#include "bench/elastic/chaos_judge.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace canopy::bench {
namespace {

bool clear_error(const std::string& code) {
  return code == "revoked" || code == "peer_failed" || code == "timeout" || code == "aborted";
}

std::set<int> indices_of(const std::string& group) {
  std::set<int> indices;
  std::istringstream in(group);
  for (std::string index; std::getline(in, index, ',');) indices.insert(std::stoi(index));
  return indices;
}

}  // namespace

void TrialRecord::take(const std::string& line) {
  std::istringstream in(line);
  std::string word;
  int index = -1;
  in >> word >> index;
  ProcessRecord& process = processes[index];
  if (word == "fault") {
    process.faulted = true;
    in >> process.fault_at >> std::ws;
    std::getline(in, process.fault_phase);
  } else if (word == "end") {
    process.ended = true;
    in >> process.kind;
    if (process.kind == "error") in >> process.code;
    in >> process.end_at;
    if (process.kind == "ok") in >> process.generation >> process.group;
    std::getline(in, process.message);
  }
}

TrialOutcome judge(const TrialPlan& plan, const TrialRecord& record, double bound) {
  TrialOutcome outcome;
  std::vector<std::pair<double, std::string>> deaths;
  for (const auto& [index, process] : record.processes)
    if (process.faulted) deaths.emplace_back(process.fault_at, process.fault_phase);
  std::sort(deaths.begin(), deaths.end());
  for (const auto& [at, phase] : deaths) outcome.landed.push_back(phase);
  const double first_fault = deaths.empty() ? record.start : deaths.front().first;

  std::set<int> in_group, erred;
  std::set<std::string> groups, codes;
  std::vector<std::string> problems;
  for (int index = 0; index < plan.processes(); ++index) {
    const auto found = record.processes.find(index);
    const ProcessRecord process = found == record.processes.end() ? ProcessRecord{} : found->second;
    if (process.faulted) {
      if (process.signal != SIGKILL) problems.push_back(fmt::format("process {} outlived its fault", index));
      continue;
    }
    if (process.hung) {
      outcome.hang = true;
      problems.push_back(fmt::format("process {} HUNG: still running {} s after the start", index, bound));
      continue;
    }
    if (!process.ended || process.exit_code != 0) {
      problems.push_back(fmt::format("process {} ended without its last word (exit {}, signal {})", index,
                                     process.exit_code, process.signal));
      continue;
    }
    outcome.fault_to_end = std::max(outcome.fault_to_end, process.end_at - first_fault);
    if (process.kind == "ok") {
      in_group.insert(index);
      groups.insert(process.group);
    } else if (process.kind == "error" && clear_error(process.code)) {
      erred.insert(index);
      codes.insert(process.code);
    } else {
      problems.push_back(
          fmt::format("process {}: {} {}{}", index, process.kind, process.code, process.message));
    }
  }
  if (groups.size() > 1)
    problems.push_back(fmt::format("the survivors hold {} different groups", groups.size()));
  if (groups.size() == 1) {
    if (indices_of(*groups.begin()) != in_group)
      problems.push_back(
          fmt::format("the group [{}] is not the processes that ended in it", *groups.begin()));
    for (int index : erred)
      if (index != plan.members || plan.scenario != Scenario::Grow)
        problems.push_back(fmt::format("member {} ended with {} while the others went on", index,
                                       record.processes.at(index).code));
  }

  std::string code_list;
  for (const std::string& code : codes) code_list += (code_list.empty() ? "" : "/") + code;
  outcome.passed = problems.empty();
  if (!outcome.passed) {
    outcome.ending = outcome.hang ? "HANG" : "FAILED";
    for (const std::string& problem : problems) outcome.detail += problem + "; ";
  } else if (!in_group.empty()) {
    outcome.ending = fmt::format("group of {}", in_group.size());
    outcome.detail = fmt::format("[{}]", *groups.begin());
    if (!erred.empty()) {
      outcome.ending += ", newcomer: " + code_list;
      outcome.detail += " " + record.processes.at(*erred.begin()).message.substr(0, 200);
    }
  } else if (!erred.empty()) {
    outcome.ending = "every rank: " + code_list;
    outcome.detail = record.processes.at(*erred.begin()).message.substr(0, 200);
  } else {
    outcome.ending = "no survivor";
  }
  return outcome;
}

}  // namespace canopy::bench
