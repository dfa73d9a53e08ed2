// Every CANOPY_* setting, one line each: its name, kind, default, range and meaning. Each layer reads its
// own from the parsed value (common/settings.hpp); docs/SETTINGS.md lists them all, and a test fails when
// one is missing there. To add a setting, add its line here and its row there.
//
// The launch environment (CANOPY_RANK, RANK, SLURM_*, OMPI_*, MASTER_ADDR, CANOPY_STORE_HOSTED, ...) is not
// here: rendezvous/launch_environment.cpp reads it, and docs/RENDEZVOUS.md has its table.
#pragma once

#include <cstdint>
#include <string_view>

namespace canopy::settings {

// A kind is a grammar (settings.hpp): what a value may look like, and how it reads.
enum class Kind : std::uint8_t {
  Flag,      // 1 or true, 0 or false
  Integer,   // a whole number
  Size,      // bytes: 8, 64K, 16M, 1G (also KiB, MiB, GiB; powers of 1024)
  Duration,  // a decimal number in the setting's unit, or with one of its own: 20us, 5ms, 0.5s
  Choice,    // one of a fixed list of words, in any case
  Text,      // anything; the layer that reads it checks its syntax
};

struct Spec {
  std::string_view name;
  Kind kind;
  // The default, in the setting's own grammar; "" = unset (`meaning` says what then).
  std::string_view fallback;
  double low = 0, high = 0;  // Integer, Size (bytes) and Duration (seconds): the range a value must fall in
  std::string_view zero_means;  // when not empty, 0 is also accepted, meaning this
  double unit_seconds = 1;      // Duration: what a bare number counts
  std::string_view choices;     // Choice: the words, separated by '|'; a value reads as the word it matches
  std::string_view meaning;     // one line, for docs/SETTINGS.md
};

constexpr Spec flag(std::string_view name, std::string_view fallback, std::string_view meaning) {
  return {name, Kind::Flag, fallback, 0, 0, {}, 1, {}, meaning};
}
constexpr Spec integer(std::string_view name, std::string_view fallback, double low, double high,
                       std::string_view meaning) {
  return {name, Kind::Integer, fallback, low, high, {}, 1, {}, meaning};
}
constexpr Spec size(std::string_view name, std::string_view fallback, double low, double high,
                    std::string_view meaning, std::string_view zero_means = {}) {
  return {name, Kind::Size, fallback, low, high, zero_means, 1, {}, meaning};
}
constexpr Spec seconds(std::string_view name, std::string_view fallback, double low, double high,
                       std::string_view meaning, std::string_view zero_means = {}) {
  return {name, Kind::Duration, fallback, low, high, zero_means, 1, {}, meaning};
}
constexpr Spec microseconds(std::string_view name, std::string_view fallback, double low, double high,
                            std::string_view meaning, std::string_view zero_means = {}) {
  return {name, Kind::Duration, fallback, low, high, zero_means, 1e-6, {}, meaning};
}
constexpr Spec choice(std::string_view name, std::string_view fallback, std::string_view choices,
                      std::string_view meaning) {
  return {name, Kind::Choice, fallback, 0, 0, {}, 1, choices, meaning};
}
constexpr Spec text(std::string_view name, std::string_view meaning) {
  return {name, Kind::Text, {}, 0, 0, {}, 1, {}, meaning};
}

inline constexpr double kDay = 86400;
inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// clang-format off
inline constexpr Spec kRegistry[] = {
  // Every call
  seconds("CANOPY_TIMEOUT", "300", 0.001, 365 * kDay, "seconds every blocking call may take"),
  choice("CANOPY_DEBUG", "WARN", "TRACE|DEBUG|INFO|WARN|ERROR|OFF", "diagnostics on stderr: INFO says which algorithm each call chose and why"),
  // Collectives
  text("CANOPY_ALGO", "force algorithms: `ring` (wherever a collective has one), or `allreduce=ring,broadcast=binomial`"),
  size("CANOPY_CHUNK_BYTES", "1M", 1, 64 * kGiB, "pipelining chunk of the algorithms that pipeline"),
  flag("CANOPY_CALIBRATE", "1", "measure alpha, beta and gamma at start-up for the cost model (0: its defaults)"),
  text("CANOPY_COST_MODEL", "`alpha,beta,gamma` (seconds, seconds/byte, seconds/byte), optionally `,beta_eager,eager_bytes`, optionally `;alpha,beta[,beta_eager,eager_bytes]` for the links between hosts: skip the start-up probe"),
  seconds("CANOPY_HEARTBEAT_SECONDS", "1", 0.001, kDay, "liveness heartbeat interval through the store", "off"),
  seconds("CANOPY_HEARTBEAT_TIMEOUT_SECONDS", "", 0.001, kDay, "a rank whose heartbeat stops this long is reported silent (default: 10 intervals)"),
  // Transports
  choice("CANOPY_CONNECT", "lazy", "lazy|eager", "`lazy` makes a link (TCP, or shared memory within a host) when a message first goes to or comes from that peer (a ring holds 2); `eager` connects every pair while the communicator forms"),
  choice("CANOPY_TRANSPORT", "auto", "auto|shm+tcp|tcp|verbs", "`auto` takes verbs where every rank has a usable RDMA device, else shm+tcp (shared memory between the ranks of a host, TCP between hosts); `tcp` turns shared memory off"),
  text("CANOPY_JOB_TOKEN", "shared secret every connection presents (canopy-run generates one)"),
  text("CANOPY_HOST_ID", "what makes two ranks one host for the host layout (default: the host name)"),
  text("CANOPY_SOCKET_IFNAME", "interfaces for the TCP transport: `eth,ib` prefixes, `^docker` excludes, `=eth0` exact"),
  choice("CANOPY_SOCKET_FAMILY", "", "ipv4|ipv6|AF_INET|AF_INET6|4|6", "address family for TCP (default: IPv4 first, then IPv6)"),
  microseconds("CANOPY_SOCKET_SPIN_US", "", 1e-6, 1, "how long TCP busy-polls before it blocks (default: 50 us unless ranks outnumber cores 4 to 1)", "never spin"),
  integer("CANOPY_SHM_MAX_RANKS", "128", 2, 1 << 20, "with CANOPY_TRANSPORT=auto, the most ranks of a group on one host that share memory: a host with more talks over TCP (the rings' budget, CANOPY_SHM_BYTES, shared by more ranks leaves a pair too little for a ring)"),
  size("CANOPY_SHM_BYTES", "32M", 0, 1024 * kGiB, "what the shared-memory rings of one host may take together; a pair whose ring does not fit talks over TCP"),
  size("CANOPY_SHM_RING_BYTES", "2M", 1024, kGiB, "the ring of each direction between two ranks of a host that talk (a power of two; smaller where the budget is short)"),
  size("CANOPY_SHM_SLOT_BYTES", "256K", 64, kGiB, "the most a sender writes into a ring before the receiver may take it (a multiple of 64)"),
  size("CANOPY_SHM_SINGLE_COPY_BYTES", "64K", 0, 1024 * kGiB, "messages of at least this size go straight from the sender's buffer into the receiver's (process_vm_readv, where the kernel allows it) instead of through the ring; 0 turns it off"),
  size("CANOPY_SHM_CELL_BYTES", "4K", 64, 64 * 1024, "the payload of each rank's cell where a group's ranks all share one host: barriers, and all-reduce, broadcast and reduce calls that fit, go through the cells in one round (the one-shot algorithms)", "no cells"),
  microseconds("CANOPY_SHM_SPIN_US", "", 1e-6, 1, "how long a rank busy-polls its shared-memory rings before it blocks (default: 500 us unless ranks outnumber cores 4 to 1)", "never spin"),
  text("CANOPY_IB_HCA", "RDMA devices and ports, NCCL_IB_HCA syntax: `mlx5_0:1,mlx5_1`, `^mlx5_2`, `=mlx5_0` (default: any active port)"),
  integer("CANOPY_IB_GID_INDEX", "", 0, 255, "a fixed GID table index (default: RoCE v2 IPv4 first)"),
  microseconds("CANOPY_IB_SPIN_US", "", 1e-6, 1, "how long verbs polls the completion queue before it sleeps (default: 20 us unless ranks outnumber cores 4 to 1)", "never spin"),
  size("CANOPY_IB_CHUNK_BYTES", "0", 4096, 2 * kGiB, "the most one RDMA write carries", "the port's largest message"),
  flag("CANOPY_IB_REG_CACHE", "0", "keep registrations of user buffers (only when buffers outlive the communicator)"),
  // Set by canopy-run for its ranks
  flag("CANOPY_STDERR_IS_TERMINAL", "0", "canopy-run's stderr is a terminal (its ranks' is a pipe): canopy-bench then draws a progress line"),
  integer("CANOPY_PROBE_LAUNCH_NS", "", 1, 4e18, "when the job was launched, in ns since 1970 (CLOCK_REALTIME): canopy-run sets its own start unless given an earlier one; canopy-bench's INFO split and the start-up probes count from it"),
};
// clang-format on

}  // namespace canopy::settings
