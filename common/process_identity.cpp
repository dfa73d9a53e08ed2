#include "common/process_identity.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <optional>
#include <sstream>

namespace canopy {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

// The pid namespace's inode: processes in one namespace see the same pids.
std::string pid_namespace() {
  char target[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

struct ProcessState {
  bool exists = false;
  char state = '?';        // R, S, D, T, Z (zombie: ended, not yet reaped), X
  std::string start_time;  // field 22 of /proc/<pid>/stat, in clock ticks since boot
};

ProcessState state_of(long pid) {
  ProcessState process;
  const std::string stat = first_line(fmt::format("/proc/{}/stat", pid));
  const std::size_t name_end = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos) return process;
  std::istringstream fields(stat.substr(name_end + 2));
  std::string field;
  fields >> process.state;
  for (int index = 4; index <= 22 && fields >> field; ++index)  // fields 4..22; the state was field 3
    if (index == 22) process.start_time = field;
  process.exists = !process.start_time.empty();
  return process;
}

struct Named {
  long pid = 0;
  std::string start_time;
};

// The process `identity` names, where it is one of this kernel and pid namespace.
std::optional<Named> named_here(const std::string& identity) {
  std::istringstream words(identity);
  std::string boot, space;
  Named named;
  if (!(words >> boot >> space >> named.pid >> named.start_time) || named.pid <= 0) return std::nullopt;
  if (boot != first_line("/proc/sys/kernel/random/boot_id") || space != pid_namespace()) return std::nullopt;
  return named;
}

}  // namespace

std::string this_process_identity() {
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  const std::string space = pid_namespace();
  const ProcessState self = state_of(static_cast<long>(::getpid()));
  if (boot.empty() || space.empty() || !self.exists) return {};
  return fmt::format("{} {} {} {}", boot, space, ::getpid(), self.start_time);
}

std::string process_end(const std::string& identity) {
  const std::optional<Named> named = named_here(identity);
  if (!named) return {};
  const long pid = named->pid;
  const ProcessState process = state_of(pid);
  if (!process.exists) return fmt::format("has exited (pid {} on this host)", pid);
  if (process.start_time != named->start_time)
    return fmt::format("has exited (pid {} on this host now names another process)", pid);
  if (process.state == 'Z' || process.state == 'X')
    return fmt::format("has exited (pid {} on this host, not yet reaped)", pid);
  return {};
}

std::string this_network_namespace() {
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  struct stat space {};
  if (boot.empty() || ::stat("/proc/self/ns/net", &space) != 0) return {};
  return fmt::format("{}/{}", boot, space.st_ino);
}

bool names_process(const std::string& identity, long pid) {
  const std::optional<Named> named = named_here(identity);
  return named && named->pid == pid;
}

}  // namespace canopy
