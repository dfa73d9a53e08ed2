#include "bench/elastic/chaos_ranks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/elastic/rank_processes.hpp"
#include "canopy/canopy.hpp"

namespace canopy::bench {

const char* scenario_name(Scenario scenario) {
  switch (scenario) {
    case Scenario::Collective:
      return "collective";
    case Scenario::Shrink:
      return "shrink";
    case Scenario::Grow:
      return "grow";
    case Scenario::TwoDeaths:
      return "two-deaths";
  }
  return "?";
}

namespace {

using namespace std::chrono_literals;

// A result that the members of the group do not imply: the trial has failed.
struct WrongResult : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', '|');
  return text;
}

// Set once this process's death is planned: it must then die inside the recovery, not after it.
bool doomed = false;

// What the main thread is doing, for the fault line: where the death really landed.
std::atomic<const char*> phase{"forming"};

// This process's own thread SIGKILLs it `us` microseconds from now, after saying so: the fault lands wherever
// the main thread is then (inside a collective, a shrink, a grow), as no outside signal could place it.
void die_after(int report_fd, int index, int us) {
  doomed = true;
  std::thread([report_fd, index, us] {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
    write_line(report_fd, fmt::format("fault {} {:.6f} {}", index, now_seconds(), phase.load()));
    ::kill(::getpid(), SIGKILL);
  }).detach();
}

// Each member contributes (its process index + 1) * (1 + j % 5) at element j: the sum over the members
// the group says it has is the only right answer.
std::int32_t element(int index, std::size_t j) {
  return (index + 1) * static_cast<std::int32_t>(1 + j % 5);
}

// Back-to-back all-reduces of mixed sizes, each checked exactly, until one fails (returns) or 20 s pass
// without a failure (WrongResult: the fault was never noticed).
void reduce_until_failure(Communicator& comm, int index, int first_members) {
  static constexpr std::size_t kCounts[] = {1, 1000, 65537};
  const std::int32_t sum = first_members * (first_members + 1) / 2;
  std::vector<std::int32_t> data;
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  phase = "all-reduce";
  try {
    for (std::size_t call = 0; std::chrono::steady_clock::now() < give_up; ++call) {
      const std::size_t count = kCounts[call % std::size(kCounts)];
      data.resize(count);
      for (std::size_t j = 0; j < count; ++j) data[j] = element(index, j);
      comm.all_reduce(std::span(data));
      for (std::size_t j = 0; j < count; ++j)
        if (data[j] != sum * (1 + static_cast<std::int32_t>(j % 5)))
          throw WrongResult(
              fmt::format("all-reduce #{} before the fault: element {} of {} is {}, expected {}", call, j,
                          count, data[j], sum * (1 + static_cast<std::int32_t>(j % 5))));
    }
  } catch (const Error&) {
    return;
  }
  throw WrongResult("no all-reduce failed within 20 s of the fault");
}

// Which processes the group holds (an all-gather of indices), then all-reduces of 1, 1,000 and 300,000
// elements (the last one pipelined) checked element by element against those members.
std::vector<std::int64_t> verify(Communicator& comm, int index) {
  const std::vector<std::int64_t> mine{index};
  std::vector<std::int64_t> members(static_cast<std::size_t>(comm.size()));
  comm.all_gather(std::span(mine), std::span(members));
  if (members[static_cast<std::size_t>(comm.rank())] != index)
    throw WrongResult(fmt::format("rank {} of the group holds process {}, not this one ({})", comm.rank(),
                                  members[static_cast<std::size_t>(comm.rank())], index));
  std::int32_t sum = 0;
  for (std::int64_t m : members) sum += static_cast<std::int32_t>(m + 1);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    std::vector<std::int32_t> data(count);
    for (std::size_t j = 0; j < count; ++j) data[j] = element(index, j);
    comm.all_reduce(std::span(data));
    for (std::size_t j = 0; j < count; ++j)
      if (data[j] != sum * (1 + static_cast<std::int32_t>(j % 5)))
        throw WrongResult(fmt::format("all-reduce of {} in the group [{}]: element {} is {}, expected {}",
                                      count, fmt::join(members, ","), j, data[j],
                                      sum * (1 + static_cast<std::int32_t>(j % 5))));
  }
  return members;
}

// What every survivor does after the fault: check the group it holds, and shrink it while that fails
// (a member that died after a shrink's confirmation is still in it). Reports the group it ends in.
void settle(Communicator comm, int index, int report_fd) {
  for (int shrinks = 0;; ++shrinks) {
    try {
      phase = "checking the group";
      const std::vector<std::int64_t> members = verify(comm, index);
      // A doomed process that got this far waits for its death: the others' barrier fails, and they shrink.
      if (doomed) {
        phase = "waiting for its death";
        std::this_thread::sleep_for(60s);
      }
      comm.barrier();  // nobody leaves while another still needs it
      write_line(report_fd, fmt::format("end {} ok {:.6f} {} {}", index, now_seconds(), comm.generation(),
                                        fmt::join(members, ",")));
      return;
    } catch (const Error&) {
      if (shrinks == 5) throw;
      phase = "shrink";
      comm = comm.shrink();
    }
  }
}

// Members wait until every one of them has seen the newcomer's ticket, as a trainer does between steps.
void wait_for_newcomer(Communicator& comm) {
  phase = "waiting for the newcomer";
  std::vector<std::int64_t> waiting{0};
  for (int round = 0; round < 1000 && waiting[0] == 0; ++round) {
    std::this_thread::sleep_for(5ms);
    waiting[0] = static_cast<std::int64_t>(comm.joiners_waiting());
    comm.all_reduce(std::span(waiting), ReduceOp::Max);
  }
}

void run(const TrialPlan& plan, int index, int report_fd) {
  CommunicatorOptions options;
  options.job_token = plan.token;
  options.timeout = std::chrono::seconds(plan.call_timeout_s);
  options.calibrate = false;
  auto store = connect_tcp_store("127.0.0.1", plan.store_port, plan.token, 10s);
  if (index == plan.members) {  // the newcomer of a grow
    if (index == plan.victim) die_after(report_fd, index, plan.delay_us);
    phase = "join";
    settle(Communicator::join(store, options), index, report_fd);
    return;
  }
  Communicator comm(store, index, plan.members, options);
  comm.agree(1);  // the group has formed everywhere: the fault lands in the phase it is meant for
  switch (plan.scenario) {
    case Scenario::Collective:
    case Scenario::TwoDeaths:
      if (index == plan.victim) die_after(report_fd, index, plan.first_fault_us);
      reduce_until_failure(comm, index, plan.members);
      if (index == plan.second_victim) die_after(report_fd, index, plan.second_delay_us);
      settle(std::move(comm), index, report_fd);
      return;
    case Scenario::Shrink: {
      std::thread revoker;
      if (index == plan.revoker)
        revoker = std::thread([&comm, &plan, index] {
          std::this_thread::sleep_for(std::chrono::milliseconds(plan.revoke_ms));
          comm.revoke(fmt::format("chaos: process {} revokes", index));
        });
      reduce_until_failure(comm, index, plan.members);
      if (revoker.joinable()) revoker.join();
      if (index == plan.victim) die_after(report_fd, index, plan.delay_us);
      settle(std::move(comm), index, report_fd);  // its first call fails at once: the shrink follows
      return;
    }
    case Scenario::Grow: {
      wait_for_newcomer(comm);
      if (index == plan.victim) die_after(report_fd, index, plan.delay_us);
      auto grown = [&comm]() -> Communicator {
        try {
          phase = "grow";
          return comm.grow();
        } catch (const Error&) {
          return std::move(comm);  // a failed grow leaves the old group as it was
        }
      };
      settle(grown(), index, report_fd);
      return;
    }
  }
}

}  // namespace

void chaos_rank(const TrialPlan& plan, int index, int report_fd) {
  try {
    run(plan, index, report_fd);
  } catch (const Error& e) {
    std::string code(to_string(e.code()));
    std::replace(code.begin(), code.end(), ' ', '_');
    write_line(report_fd, fmt::format("end {} error {} {:.6f} {}", index, code, now_seconds(),
                                      one_line(e.what()).substr(0, 3000)));
  } catch (const std::exception& e) {
    write_line(report_fd, fmt::format("end {} wrong {:.6f} {}", index, now_seconds(), one_line(e.what())));
  }
  std::_Exit(0);
}

}  // namespace canopy::bench
