// The launch environment parser (rendezvous/bootstrap.hpp parse_launch_environment) on arbitrary
// environments. Input: lines "NAME=VALUE" (launch_environment.dict lists the names it reads).
// Properties: refusals are Error(Config) only; an accepted environment gives a rank inside the world,
// a local rank inside the local world, a usable store location (an address, a directory, or PMIx) and a
// known launcher name; the parse is deterministic.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "common/env.hpp"
#include "fuzz/fuzz_check.hpp"
#include "rendezvous/bootstrap.hpp"

using canopy::Error;
using canopy::ErrorCode;
using canopy::fuzz::check;
using canopy::rendezvous::LaunchInfo;

namespace {

void check_consistent(const LaunchInfo& info) {
  static const std::set<std::string> kSources = {"canopy", "torchrun", "slurm", "openmpi", "pmi", "default"};
  check(info.world_size >= 1, "world size below 1");
  check(info.rank >= 0 && info.rank < info.world_size, "rank outside the world");
  check(
      info.local_world_size == -1 || (info.local_world_size >= 1 && info.local_world_size <= info.world_size),
      "local world size outside 1..world size");
  check(info.local_rank == -1 || (info.local_rank >= 0 &&
                                  (info.local_world_size == -1 || info.local_rank < info.local_world_size)),
        "local rank outside the local world");
  check(info.store_port >= 1 || info.store_through_pmix, "store port 0 without PMIx to share the real one");
  check(
      info.world_size == 1 || !info.store_host.empty() || !info.store_file.empty() || info.store_through_pmix ||
          !info.store_etcd.empty(),
      "several ranks without a store address, a store file, PMIx or an etcd store");
  check(info.restart_count >= 0, "negative restart count");
  check(kSources.count(info.source) == 1, "unknown launcher source");
  check(!info.elastic || (info.elastic->min >= 1 && info.elastic->min <= info.elastic->max),
        "an elastic range outside 1 <= MIN <= MAX");
  check(!info.elastic_join || info.elastic, "a replacement outside an elastic job");
  check(info.store_round() == (info.elastic ? 0 : info.restart_count), "a store round that is not the job's");
}

bool same(const LaunchInfo& a, const LaunchInfo& b) {
  return a.rank == b.rank && a.world_size == b.world_size && a.local_rank == b.local_rank &&
         a.local_world_size == b.local_world_size && a.store_host == b.store_host &&
         a.store_port == b.store_port && a.store_file == b.store_file && a.store_etcd == b.store_etcd &&
         a.store_hosted_externally == b.store_hosted_externally && a.job_token == b.job_token &&
         a.restart_count == b.restart_count && a.source == b.source &&
         a.store_through_pmix == b.store_through_pmix && a.store_origin == b.store_origin &&
         a.elastic.has_value() == b.elastic.has_value() &&
         (!a.elastic || (a.elastic->min == b.elastic->min && a.elastic->max == b.elastic->max)) &&
         a.elastic_join == b.elastic_join;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  canopy::EnvMap env =
      canopy::fuzz::environment_from(std::string_view(reinterpret_cast<const char*>(data), size));
  LaunchInfo info;
  try {
    info = canopy::rendezvous::parse_launch_environment(env);
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "parse_launch_environment");
    check(std::string_view(e.what()).find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string_view::npos,
          "a Config error that names no variable", e.what());
    return 0;
  }
  check_consistent(info);
  check(same(info, canopy::rendezvous::parse_launch_environment(env)), "the parse is not deterministic");
  return 0;
}
