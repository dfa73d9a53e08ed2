// What the start-up probes record about their own process, read from /proc: descriptors, sockets, memory,
// and the clock shared with the launch. No communicator, so the MPI probe uses it too.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace canopy::bench::startup {

// CLOCK_REALTIME in ns: the one clock that `date +%s%N` in the launching script and every rank share.
std::int64_t realtime_ns();

// Seconds from CANOPY_PROBE_LAUNCH_NS (canopy-run's start, or what startup.sh set just before it started
// the launcher) to now_ns; empty when it is unset. Read through the settings registry: a value that is not
// a number is an Error(Config) naming it.
std::optional<double> seconds_since_launch(std::int64_t now_ns);
// The same as a row's value: null where the script gave no launch time.
nlohmann::ordered_json since_launch(std::int64_t now_ns);
double seconds_between(std::int64_t from_ns, std::int64_t to_ns);

// CANOPY_HOST_ID where set (emulated hosts share the machine's name), else the host name.
std::string host_name();

// The rank the launcher gave this process (CANOPY_RANK, RANK, OMPI_COMM_WORLD_RANK), else 1000000 + the pid,
// for a row written before the library said.
int launcher_rank();

struct Descriptors {
  int total = 0;    // open descriptors, not counting the one used to list them
  int sockets = 0;  // of those, the ones whose /proc/self/fd link reads "socket:[...]"
};
Descriptors count_descriptors();

struct Memory {
  std::int64_t rss_kib = -1;  // VmRSS: resident now
  std::int64_t hwm_kib = -1;  // VmHWM: the most resident so far
};
Memory read_memory();

// {"sockets", "fds", "rss_kib", "hwm_kib"} with `suffix` appended to each key ("" or "_after_sweep").
void record_process(nlohmann::ordered_json& row, const std::string& suffix);

// Appends `row` as one line to DIR/rank-<rank>.json; says on stderr when it cannot.
void append_row(const std::string& dir, int rank, const nlohmann::ordered_json& row);

}  // namespace canopy::bench::startup
