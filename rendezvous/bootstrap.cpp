// rendezvous(): host or reach the store, claim this rank, learn the local ranks.
#include "rendezvous/bootstrap.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "rendezvous/host_addresses.hpp"
#include "rendezvous/etcd_store.hpp"
#include "rendezvous/pmix_exchange.hpp"

namespace canopy::rendezvous {
namespace {

// How long a rank tries one of the addresses rank 0 shared through PMIx before the next.
constexpr Duration kPmixAddressLimit = std::chrono::seconds(3);

std::string rank_key(std::string_view what, int rank) {
  return fmt::format("{}/{}", what, rank);
}

// Two processes launched with the same rank would otherwise deadlock or corrupt a collective much
// later. The first to write "rank/<r>" wins; the other learns who holds its rank.
void claim_rank(Store& store, const LaunchInfo& info, const std::string& host_id) {
  std::string me = fmt::format("{} {}", host_id, rank_claim());
  std::string holder = store.compare_set(rank_key("rank", info.rank), "", me);
  if (holder != me) fail_rank_claimed(info.rank, holder, me);
}

// Rank 0's store, on every address; a port that is taken is named with where it came from.
std::unique_ptr<TcpStoreServer> host_store(std::uint16_t port, const LaunchInfo& info) {
  try {
    return std::make_unique<TcpStoreServer>("", port, info.job_token);
  } catch (const Error& e) {
    fail(e.code(),
         "rendezvous: rank 0 cannot host the store on port {} ({}): {}; set CANOPY_MASTER_PORT to a "
         "free port",
         port, info.store_origin, e.what());
  }
}

// mpirun across hosts: rank 0 hosts the store on a free port (unless one is given) and shares "<port>
// <address>..." (every non-loopback address of its host) through PMIx; the others try those addresses in
// order.
std::shared_ptr<Store> connect_through_pmix(const LaunchInfo& info, Duration timeout,
                                            std::unique_ptr<TcpStoreServer>& server) {
  std::string shared;
  if (info.rank == 0) {
    server = host_store(info.store_port, info);
    shared = std::to_string(server->port());
    for (const HostAddress& address : host_addresses()) {
      if (!address.loopback) shared += " " + address.ip;
    }
  }
  shared = share_from_rank_zero_through_pmix(info.rank, info.world_size, shared, timeout);
  std::istringstream words(shared);
  unsigned port = 0;
  std::vector<std::string> addresses;
  words >> port;
  for (std::string address; words >> address;) addresses.push_back(address);
  if (port < 1 || port > 65535 || (info.rank != 0 && addresses.empty()))
    fail(ErrorCode::Protocol, "rendezvous: rank 0 shared '{}' through PMIx, not '<port> <address>...'",
         shared);
  if (info.rank == 0) addresses = {"127.0.0.1"};
  // Rank 0 listens before it shares, so an address that does not answer soon never will.
  Deadline deadline = Deadline::after(timeout);
  std::string failures;
  for (const std::string& address : addresses) {
    try {
      auto store = connect_tcp_store(
          address, static_cast<std::uint16_t>(port), info.job_token,
          std::min<Duration>(kPmixAddressLimit, std::chrono::duration_cast<Duration>(deadline.remaining())));
      log::info(
          "rendezvous: rank {} of {} (openmpi launch) uses the TcpStore at {}:{} (shared by rank 0 "
          "through PMIx){}",
          info.rank, info.world_size, address, port, server ? ", hosted here" : "");
      return store;
    } catch (const Error& e) {
      failures += fmt::format("; {}: {}", address, e.what());
    }
  }
  fail(ErrorCode::PeerFailed,
       "rendezvous: rank {} reaches none of the addresses rank 0 shared through PMIx{}", info.rank, failures);
}

}  // namespace

std::string rank_claim() {
  std::random_device device;
  return fmt::format("pid {} ({:08x})", ::getpid(), device());
}

void fail_rank_claimed(int rank, std::string_view holder, std::string_view me) {
  fail(ErrorCode::Config,
       "rendezvous: rank {} is already claimed by {} (we are {}): two processes were given the same rank "
       "(check the launch variables), or a FileStore directory still holds an earlier run's keys (use a "
       "fresh one)",
       rank, holder, me);
}

std::string host_identity(std::string_view configured) {
  if (!configured.empty()) return std::string(configured);
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) fail_errno("rendezvous: gethostname()");
  // Network namespaces and containers keep the machine's host name; the namespace tells them apart.
  const std::string space = this_network_namespace();
  return space.empty() ? std::string(name) : fmt::format("{} (net {})", name, space);
}

std::vector<std::string> exchange_with_all_ranks(Store& store, std::string_view what, int rank,
                                                 int world_size, const std::string& value) {
  store.set(rank_key(what, rank), value);
  return gather_from_all_ranks(store, what, rank, world_size);
}

std::vector<std::string> gather_from_all_ranks(Store& store, std::string_view what, int rank,
                                               int world_size) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) keys.push_back(rank_key(what, r));
  // One request for all of them on a TcpStore: rank 0 of agree_through_rank_zero makes O(1) requests.
  try {
    return store.get_many(keys);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    fail(ErrorCode::Timeout, "rendezvous: rank {} waited {} ms for all {} ranks to arrive; {}", rank,
         store.timeout().count(), world_size, e.what());
  }
}

std::string agree_through_rank_zero(
    Store& store, std::string_view what, int rank, int world_size, const std::string& value,
    const std::function<std::string(const std::vector<std::string>&)>& combine, const PublishValue& publish) {
  std::vector<int> everyone(static_cast<std::size_t>(world_size));
  std::iota(everyone.begin(), everyone.end(), 0);
  return agree_among(store, what, rank, everyone, value, combine, {}, publish);
}

std::string agree_among(Store& store, std::string_view what, int rank, const std::vector<int>& members,
                        const std::string& value,
                        const std::function<std::string(const std::vector<std::string>&)>& combine,
                        std::string_view answer_at, const PublishValue& publish) {
  const std::string answer_key(answer_at.empty() ? what : answer_at);
  if (std::find(members.begin(), members.end(), rank) == members.end()) return store.get(answer_key);
  if (publish)
    publish(store, rank_key(what, rank), value);
  else
    store.set(rank_key(what, rank), value);
  if (rank == members.front()) {
    std::vector<std::string> keys;
    for (int member : members) keys.push_back(rank_key(what, member));
    std::vector<std::string> values;
    try {
      values = store.get_many(keys);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw;
      fail(ErrorCode::Timeout, "rendezvous: rank {} waited {} ms for the {} ranks agreeing on '{}'; {}", rank,
           store.timeout().count(), members.size(), what, e.what());
    }
    // The answer it publishes is the one it returns: no request to read it back.
    std::string answer = combine(values);
    store.set(answer_key, answer);
    return answer;
  }
  return store.get(answer_key);
}

void assign_local_ranks(Store& store, LaunchInfo& info, const std::string& host_id) {
  const std::vector<std::string> hosts =
      exchange_with_all_ranks(store, "host", info.rank, info.world_size, host_id);
  int local_rank = 0, local_world_size = 0;
  for (int r = 0; r < info.world_size; ++r) {
    if (hosts[static_cast<std::size_t>(r)] != host_id) continue;
    if (r < info.rank) ++local_rank;
    ++local_world_size;
  }
  if (info.local_rank < 0) info.local_rank = local_rank;
  if (info.local_world_size < 0) info.local_world_size = local_world_size;
  log::debug("rendezvous: rank {} is local rank {} of {} on host '{}'", info.rank, info.local_rank,
             info.local_world_size, host_id);
}

std::string round_prefix(int round) {
  return fmt::format("round/{}", round);
}

Rendezvous rendezvous(const EnvMap& env, Duration timeout, RankClaim claim) {
  Rendezvous result;
  result.info = parse_launch_environment(env);
  LaunchInfo& info = result.info;
  std::shared_ptr<Store> base;
  if (!info.store_file.empty()) {
    base = open_file_store(info.store_file);
    log::info("rendezvous: rank {} of {} ({} launch) uses the FileStore in {}", info.rank, info.world_size,
              info.source, info.store_file);
  } else if (!info.store_etcd.empty()) {
    base = connect_etcd_store(info.store_etcd, info.job_token, timeout);
    log::info("rendezvous: rank {} of {} ({} launch) uses the etcd store {} ({})", info.rank, info.world_size,
              info.source, info.store_etcd, info.store_origin);
  } else if (info.store_through_pmix) {
    base = connect_through_pmix(info, timeout, result.server);
  } else {
    std::string host = info.store_host;
    std::uint16_t port = info.store_port;
    // A replacement never hosts the store: the group it joins already uses one.
    if (!info.store_hosted_externally && info.rank == 0 && !info.elastic_join) {
      if (host.empty()) {
        // One process and no launcher: a private store nobody else needs to find.
        host = "127.0.0.1";
        result.server = std::make_unique<TcpStoreServer>(host, 0, info.job_token);
        port = result.server->port();
      } else {
        result.server = host_store(port, info);
      }
    }
    base = connect_tcp_store(host, port, info.job_token, timeout);
    log::info("rendezvous: rank {} of {} ({} launch) uses the TcpStore at {}:{} ({}){}", info.rank,
              info.world_size, info.source, host, port, info.store_origin,
              result.server ? ", hosted here" : "");
  }
  base->set_timeout(timeout);
  result.store = std::make_shared<PrefixStore>(base, round_prefix(info.store_round()));
  // A replacement claims no rank: the one it was started with is the dead rank's, whose claim stays.
  if (claim == RankClaim::ByCaller || info.elastic_join) return result;
  std::string host_id = host_identity(env);
  claim_rank(*result.store, info, host_id);
  if (info.local_rank < 0 || info.local_world_size < 0) assign_local_ranks(*result.store, info, host_id);
  return result;
}

}  // namespace canopy::rendezvous
