#include "bench/startup/process_facts.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/settings.hpp"

namespace canopy::bench::startup {

std::int64_t realtime_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

std::optional<double> seconds_since_launch(std::int64_t now_ns) {
  const Settings settings = Settings::from_environment();
  if (!settings.has("CANOPY_PROBE_LAUNCH_NS")) return std::nullopt;
  return static_cast<double>(now_ns - settings.integer("CANOPY_PROBE_LAUNCH_NS")) * 1e-9;
}

nlohmann::ordered_json since_launch(std::int64_t now_ns) {
  const auto s = seconds_since_launch(now_ns);
  return s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
}

double seconds_between(std::int64_t from_ns, std::int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) * 1e-9;
}

std::string host_name() {
  if (const char* id = std::getenv("CANOPY_HOST_ID"); id != nullptr && *id != '\0') return id;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

int launcher_rank() {
  for (const char* name : {"CANOPY_RANK", "RANK", "OMPI_COMM_WORLD_RANK"})
    if (const char* text = std::getenv(name); text != nullptr && *text != '\0') return std::atoi(text);
  return 1'000'000 + static_cast<int>(getpid());
}

Descriptors count_descriptors() {
  Descriptors d;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return {-1, -1};
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    if (std::atoi(entry->d_name) == own) continue;
    ++d.total;
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    char target[64];
    const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)).starts_with("socket:")) ++d.sockets;
  }
  closedir(dir);
  return d;
}

Memory read_memory() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = -1;
    fields >> key >> kib;
    if (key == "VmRSS:") m.rss_kib = kib;
    if (key == "VmHWM:") m.hwm_kib = kib;
  }
  return m;
}

void record_process(nlohmann::ordered_json& row, const std::string& suffix) {
  const Descriptors d = count_descriptors();
  const Memory m = read_memory();
  row["sockets" + suffix] = d.sockets;
  row["fds" + suffix] = d.total;
  row["rss_kib" + suffix] = m.rss_kib;
  row["hwm_kib" + suffix] = m.hwm_kib;
}

void append_row(const std::string& dir, int rank, const nlohmann::ordered_json& row) {
  const std::string path = dir + "/rank-" + std::to_string(rank) + ".json";
  std::ofstream out(path, std::ios::app);
  out << row.dump() << "\n";
  if (!out) std::fprintf(stderr, "startup probe: cannot write '%s'\n", path.c_str());
}

}  // namespace canopy::bench::startup
