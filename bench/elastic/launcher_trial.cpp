#include "bench/elastic/launcher_trial.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/elastic/rank_processes.hpp"

namespace canopy::bench {
namespace {

// canopy-run with its stdout (the ranks' prefixed lines) on a pipe to this process; stderr passes through.
struct Launch {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Launch start(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(args[0], args.data());
    std::perror(args[0]);
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, ::fdopen(fds[0], "r")};
}

// What one line of the trainer says, behind canopy-run's "[slot] " prefix.
struct Line {
  int slot = -1;
  std::string text;
  double at = 0;  // the trainer's clock, where the line has one ("... at T")
};

bool parse(const char* raw, Line& line) {
  int length = 0;
  if (std::sscanf(raw, "[%d] %n", &line.slot, &length) != 1 || length == 0) return false;
  line.text = raw + length;
  if (!line.text.empty() && line.text.back() == '\n') line.text.pop_back();
  const auto at = line.text.rfind(" at ");
  line.at = at == std::string::npos ? 0 : std::atof(line.text.c_str() + at + 4);
  return true;
}

bool starts(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

LauncherTrialTimes run_launcher_trial(const LauncherTrialSettings& s, std::mt19937& random, int number) {
  const int victim = std::uniform_int_distribution<int>(0, s.ranks - 1)(random);
  const int kill_after = std::uniform_int_distribution<int>(5, 19)(random);
  Launch launch = start({s.canopy_run, "--nproc", std::to_string(s.ranks), "--elastic",
                         fmt::format("{}:{}", s.ranks - 1, s.ranks), "--max-restarts", "1", s.trainer,
                         "--steps", std::to_string(s.steps), "--step-ms", std::to_string(s.step_ms),
                         "--count", std::to_string(s.count)});
  if (launch.pid < 0) return {};
  std::map<int, pid_t> member_pids;
  std::set<int> shrunk;             // survivors that have shrunk
  std::map<int, double> next_step;  // survivor -> end of its first step after the shrink
  double killed_at = 0, replacement_started = 0, replacement_stepped = 0;
  int good_finals = 0;
  char raw[512];
  // Bounded: canopy-run's ranks time out on their own (CANOPY_TIMEOUT), and the loop ends at its EOF.
  while (std::fgets(raw, sizeof raw, launch.out) != nullptr) {
    Line line;
    if (!parse(raw, line)) continue;
    int pid = 0;
    if (std::sscanf(line.text.c_str(), "started pid %d as member", &pid) == 1) member_pids[line.slot] = pid;
    if (starts(line.text, "started pid ") && line.text.find("as replacement") != std::string::npos)
      replacement_started = line.at;
    const bool is_step = starts(line.text, "step ");
    if (is_step && line.slot == victim && killed_at == 0 &&
        starts(line.text, fmt::format("step {} ", kill_after).c_str())) {
      ::kill(member_pids[victim], SIGKILL);
      killed_at = now_seconds();
    }
    if (starts(line.text, "shrunk to size")) shrunk.insert(line.slot);
    if (is_step && line.slot != victim && shrunk.contains(line.slot) && !next_step.contains(line.slot))
      next_step[line.slot] = line.at;
    if (is_step && line.slot == victim && replacement_started > 0 && replacement_stepped == 0)
      replacement_stepped = line.at;
    char digest[17] = {}, expected[17] = {};
    if (std::sscanf(line.text.c_str(), "final step %*d digest %16s expected %16s", digest, expected) == 2)
      good_finals += std::string(digest) == expected ? 1 : 0;
  }
  std::fclose(launch.out);
  int status = 0;
  ::waitpid(launch.pid, &status, 0);

  LauncherTrialTimes times;
  double slowest = 0;
  for (const auto& [slot, at] : next_step) slowest = std::max(slowest, at);
  times.recovery = slowest - killed_at;
  times.replacement_up = replacement_started - killed_at;
  times.replacement_in = replacement_stepped - replacement_started;
  const bool exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  times.ok = exited_0 && killed_at > 0 && static_cast<int>(next_step.size()) == s.ranks - 1 &&
             replacement_stepped > 0 && good_finals == s.ranks;
  fmt::print(
      "trial {}: rank {} killed after step {}; {} of {} survivors went on, recovery {:.3f} s; replacement up "
      "{:.3f} s after the kill, training {:.3f} s after its start; {} of {} ranks ended with the "
      "failure-free "
      "weights; canopy-run {}\n",
      number, victim, kill_after, next_step.size(), s.ranks - 1, times.recovery, times.replacement_up,
      times.replacement_in, good_finals, s.ranks, exited_0 ? "exited 0" : "FAILED");
  std::fflush(stdout);
  return times;
}

}  // namespace canopy::bench
