// The program the launcher tests run under canopy-run. Its arguments are steps done in order, each
// "name[:argument][@rank]" (a step with @rank runs only on that global rank):
//   env                     print the launch variables and PID, one NAME=value line each
//   args                    print "argv:" and every argument, then exit 0
//   lines:N                 print N lines "line <rank> <i> <payload>", each written in several pieces
//   stderr:TEXT             print TEXT on stderr
//   partial:TEXT            print TEXT on stdout without a newline
//   sleep:SECONDS           sleep
//   exit:CODE               exit with CODE
//   kill:SIGNAL             kill itself with SIGNAL
//   fail-before-restart:K   exit 1 while CANOPY_RESTART_COUNT < K
//   ignore-term             ignore SIGTERM from now on
//   report-int              on SIGINT, print "got SIGINT" and exit 0
//   fds                     print "open-fds=" and the descriptors this process has open, e.g. "0 1 2"
//   barrier:DIR             wait (20 s at most) until every rank of this attempt has reached this step,
//   through
//                           files in DIR: lets a test make sure all ranks run before one of them fails
//   rendezvous              join the job through the store canopy-run hosts (rendezvous::rendezvous), add 1
//                           to a counter and wait until every rank has; print "store rank=R world=W count=C"
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/cpu_list.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "rendezvous/bootstrap.hpp"

namespace {

void write_out(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

int my_rank() {
  return std::atoi(env_or_empty("RANK").c_str());
}

void print_environment() {
  static constexpr const char* kNames[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "CANOPY_MASTER_PORT",
                                           "CANOPY_RANK",
                                           "CANOPY_WORLD_SIZE",
                                           "CANOPY_LOCAL_RANK",
                                           "CANOPY_LOCAL_WORLD_SIZE",
                                           "CANOPY_JOB_TOKEN",
                                           "CANOPY_STORE_HOSTED",
                                           "CANOPY_RESTART_COUNT",
                                           "TORCHELASTIC_RESTART_COUNT",
                                           "TORCHELASTIC_MAX_RESTARTS",
                                           "CANOPY_ELASTIC",
                                           "CANOPY_ELASTIC_JOIN"};
  std::string text;
  for (const char* name : kNames) text += fmt::format("{}={}\n", name, env_or_empty(name));
  text += fmt::format("PID={}\n", ::getpid());
  write_out(STDOUT_FILENO, text);
}

// Each line goes out in three writes with pauses between them, inviting other ranks' bytes in between.
void print_lines(int count) {
  int rank = my_rank();
  for (int i = 0; i < count; ++i) {
    write_out(STDOUT_FILENO, fmt::format("line {} ", rank));
    std::this_thread::yield();
    write_out(STDOUT_FILENO, fmt::format("{} ", i));
    if (i % 16 == 0) ::usleep(200);
    write_out(STDOUT_FILENO, std::string(40 + i % 7, static_cast<char>('a' + rank % 26)) + "\n");
  }
}

void join_through_the_store() {
  auto joined = canopy::rendezvous::rendezvous(canopy::current_environment(), std::chrono::seconds(20));
  joined.store->add("launcher-test/arrived", 1);
  auto deadline = canopy::Deadline::after(std::chrono::seconds(20));
  std::int64_t count = 0;
  while ((count = joined.store->add("launcher-test/arrived", 0)) < joined.info.world_size &&
         !deadline.expired()) {
    ::usleep(5000);
  }
  write_out(STDOUT_FILENO,
            fmt::format("store rank={} world={} count={} hosted={}\n", joined.info.rank,
                        joined.info.world_size, count, joined.server ? "by-rank" : "by-launcher"));
}

void print_open_descriptors() {
  std::vector<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.push_back(std::atoi(entry.path().filename().c_str()));
  }
  std::sort(fds.begin(), fds.end());
  fds.pop_back();  // the highest is the directory listing itself, opened last
  std::string text = "open-fds=";
  for (int fd : fds) text += fmt::format("{} ", fd);
  text.back() = '\n';
  write_out(STDOUT_FILENO, text);
}

bool file_barrier(const std::string& directory) {
  namespace fs = std::filesystem;
  fs::path round = fs::path(directory) / ("attempt-" + env_or_empty("CANOPY_RESTART_COUNT"));
  fs::create_directories(round);
  std::ofstream(round / ("rank-" + env_or_empty("RANK"))) << "here\n";
  auto world = static_cast<std::ptrdiff_t>(std::atoi(env_or_empty("WORLD_SIZE").c_str()));
  auto deadline = canopy::Deadline::after(std::chrono::seconds(20));
  while (std::distance(fs::directory_iterator(round), fs::directory_iterator()) < world) {
    if (deadline.expired()) return false;
    ::usleep(2000);
  }
  return true;
}

void on_sigint(int) {
  static const char kText[] = "got SIGINT\n";
  [[maybe_unused]] auto n = ::write(STDOUT_FILENO, kText, sizeof kText - 1);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string step = argv[i];
    if (auto at = step.rfind('@'); at != std::string::npos) {
      if (std::atoi(step.c_str() + at + 1) != my_rank()) continue;
      step.resize(at);
    }
    std::string name = step, arg;
    if (auto colon = step.find(':'); colon != std::string::npos) {
      name = step.substr(0, colon);
      arg = step.substr(colon + 1);
    }
    if (name == "env") {
      print_environment();
    } else if (name == "args") {
      std::string text = "argv:";
      for (int j = 1; j < argc; ++j) text += fmt::format(" {}", argv[j]);
      write_out(STDOUT_FILENO, text + "\n");
      return 0;  // the rest are arguments to show, not steps
    } else if (name == "lines") {
      print_lines(std::atoi(arg.c_str()));
    } else if (name == "stderr") {
      write_out(STDERR_FILENO, arg + "\n");
    } else if (name == "partial") {
      write_out(STDOUT_FILENO, arg);
    } else if (name == "sleep") {
      ::usleep(static_cast<useconds_t>(std::atof(arg.c_str()) * 1e6));
    } else if (name == "exit") {
      return std::atoi(arg.c_str());
    } else if (name == "kill") {
      ::kill(::getpid(), std::atoi(arg.c_str()));
      ::pause();
    } else if (name == "fail-before-restart") {
      if (std::atoi(env_or_empty("CANOPY_RESTART_COUNT").c_str()) < std::atoi(arg.c_str())) return 1;
    } else if (name == "ignore-term") {
      ::signal(SIGTERM, SIG_IGN);
    } else if (name == "report-int") {
      ::signal(SIGINT, on_sigint);
    } else if (name == "fds") {
      print_open_descriptors();
    } else if (name == "cpus") {
      write_out(STDOUT_FILENO, fmt::format("cpus={}\n", canopy::format_cpu_list(canopy::allowed_cpus())));
    } else if (name == "barrier") {
      if (!file_barrier(arg)) {
        write_out(STDERR_FILENO, "launcher_probe: the other ranks never reached the barrier\n");
        return 97;
      }
    } else if (name == "rendezvous") {
      try {
        join_through_the_store();
      } catch (const std::exception& e) {
        write_out(STDERR_FILENO, fmt::format("launcher_probe: rendezvous failed: {}\n", e.what()));
        return 98;
      }
    } else {
      write_out(STDERR_FILENO, fmt::format("launcher_probe: unknown step '{}'\n", step));
      return 99;
    }
  }
  return 0;
}
