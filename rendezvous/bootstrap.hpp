// From a launcher's environment to a rank, a world size and a connected store: torchrun, SLURM,
// Open MPI, PMI (MPICH/Hydra) and Canopy's own canopy-run conventions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/store.hpp"
#include "common/elastic_range.hpp"
#include "common/env.hpp"

namespace canopy::rendezvous {

struct LaunchInfo {
  int rank = 0, world_size = 1;
  int local_rank = -1, local_world_size = -1;  // -1: not given, derive through the store
  // Where the TcpStore is (rendezvous/store_address.hpp). Empty only for a single process started without
  // any launcher, and under PMIx: rank 0 then hosts a store on an ephemeral port (private on 127.0.0.1, or
  // on every address with its address shared through PMIx).
  std::string store_host;
  std::uint16_t store_port = 29500;
  bool store_through_pmix = false;       // mpirun across hosts without an address given
  std::string store_origin;              // where host and port came from, for messages: "MASTER_ADDR and ..."
  std::string store_file;                // CANOPY_STORE_FILE=<dir>: use a FileStore instead of TCP
  std::string store_etcd;                // CANOPY_MASTER_ADDR=etcd://...: an etcd cluster, which no rank hosts
  bool store_hosted_externally = false;  // CANOPY_STORE_HOSTED=1: canopy-run hosts it; else rank 0 does.
                                         // torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) is a
                                         // PyTorch TCPStore: Canopy needs CANOPY_MASTER_PORT beside it
  std::string job_token;                 // CANOPY_JOB_TOKEN, else derived from a job id, else ""
  int restart_count = 0;                 // CANOPY_RESTART_COUNT, else TORCHELASTIC_RESTART_COUNT
  // CANOPY_ELASTIC=MIN:MAX: canopy-run --elastic replaces a dead rank instead of restarting the group.
  std::optional<ElasticRange> elastic;
  // CANOPY_ELASTIC_JOIN=1: this process replaces a dead rank and joins the running group
  // (Communicator::join) instead of forming one; its rank there is decided by the grow, not by `rank`.
  bool elastic_join = false;
  std::string source;  // "canopy", "torchrun", "slurm", "openmpi", "pmi"; "default"
                       // when no launcher variable is set (one process)

  // The rendezvous round, the store's key prefix "round/<n>": the restart count, except in an elastic
  // job, whose group is never restarted as a whole (its restart count counts replacements, which join
  // the group's one round).
  int store_round() const { return elastic ? 0 : restart_count; }
};

// The key prefix of rendezvous round `round` in the launcher's store: "round/<n>".
std::string round_prefix(int round);

// Reads the launch variables (docs/RENDEZVOUS.md has the table and the precedence). Pure: no I/O.
// Throws Error(Config) naming the variable(s) for a missing, malformed or contradictory setting.
LaunchInfo parse_launch_environment(const EnvMap& env);

struct Rendezvous {
  LaunchInfo info;
  std::shared_ptr<Store> store;            // already prefixed with the restart round ("round/<n>")
  std::unique_ptr<TcpStoreServer> server;  // set on the rank that hosts the store: keep it alive until
                                           // every rank is done with the store
};

// Who claims the rank and learns the local ranks: rendezvous() (Here), or its caller (ByCaller), whose
// first store request claims the rank itself and which learns the local ranks from the host layout (the
// world communicator's record: collectives/forming/host_layout_exchange.hpp). ByCaller leaves the local rank and
// local world size -1 where the launcher did not give them.
enum class RankClaim { Here, ByCaller };

// Parses the environment, hosts the store (rank 0, unless a launcher hosts it) or connects to it,
// claims this rank (two processes with one rank are an Error(Config)) and derives the local rank
// and local world size when the launcher did not give them (both unless `claim` is ByCaller). Every
// wait is bounded by `timeout`, which also becomes the store's default timeout.
Rendezvous rendezvous(const EnvMap& env, Duration timeout, RankClaim claim = RankClaim::Here);

// Every rank publishes "<what>/<rank>" = value and returns everyone's, by rank; a rank that does not
// arrive within the store's timeout is an Error(Timeout) that says how many were awaited. Two requests per
// rank (a set and one get_many), but every rank reads every value: P^2 bytes through the store in all.
std::vector<std::string> exchange_with_all_ranks(Store& store, std::string_view what, int rank,
                                                 int world_size, const std::string& value);

// Waits for "<what>/0" .. "<what>/<world_size - 1>" and returns them, in one get_many; `rank` names the
// waiter in errors.
std::vector<std::string> gather_from_all_ranks(Store& store, std::string_view what, int rank, int world_size);

// How a rank publishes its value under `key` in an agreement: store.set(key, value) when empty; a claim
// (claim_key) where the key must be this process's alone.
using PublishValue = std::function<void(Store& store, const std::string& key, const std::string& value)>;

// Every rank publishes "<what>/<rank>" = value; rank 0 gathers them, makes one answer of them with
// `combine` and publishes it as "<what>"; every rank returns that answer. Two store requests per rank,
// three for rank 0 (a set, one get_many, a set: it returns the answer it made without reading it back):
// O(P) in all, O(1) for any one rank.
std::string agree_through_rank_zero(
    Store& store, std::string_view what, int rank, int world_size, const std::string& value,
    const std::function<std::string(const std::vector<std::string>&)>& combine,
    const PublishValue& publish = {});

// The same among `members` only (ranks in increasing order; the first gathers and combines, in the
// members' order): a member publishes `value`, and every rank that calls, member or not, returns the
// answer, published as `answer_at` (empty: "<what>"; several groups agreeing at once each need their
// own). A rank outside makes one request.
std::string agree_among(Store& store, std::string_view what, int rank, const std::vector<int>& members,
                        const std::string& value,
                        const std::function<std::string(const std::vector<std::string>&)>& combine,
                        std::string_view answer_at = {}, const PublishValue& publish = {});

// This process's claim on a rank: "pid <pid> (<random>)", unlike any other process's.
std::string rank_claim();

// Error(Config): rank `rank` is already held by `holder` (a description of the process that claimed it),
// not by this process (`me`): two processes were given one rank, or a FileStore holds an earlier run's keys.
[[noreturn]] void fail_rank_claimed(int rank, std::string_view holder, std::string_view me);

// Every rank publishes "host/<rank>" = host_id and reads everyone's: the local rank is the position
// among the ranks with the same host_id ordered by global rank, the local world size their number.
// Fills only the fields that are -1.
void assign_local_ranks(Store& store, LaunchInfo& info, const std::string& host_id);

// `configured` (CANOPY_HOST_ID: tests, emulated hosts) or, when empty, the host name with the kernel and
// network namespace (this_network_namespace()): ranks that cannot share memory are never one host.
std::string host_identity(std::string_view configured);
inline std::string host_identity(const EnvMap& env) {
  return host_identity(env_value(env, "CANOPY_HOST_ID").value_or(""));
}

}  // namespace canopy::rendezvous
