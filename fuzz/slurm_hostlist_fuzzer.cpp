// SLURM's hostlist parser (rendezvous/slurm_hostlist.hpp) on arbitrary text.
// Properties: refusals are Error(Config) only; an accepted list names between 1 and kMaxHostlistHosts
// hosts, each a non-empty name without brackets, commas or spaces; the first host is the expansion's
// first; and the expanded hosts, joined by commas, are a hostlist that expands to themselves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "rendezvous/slurm_hostlist.hpp"

using canopy::Error;
using canopy::ErrorCode;
using canopy::fuzz::check;
namespace rdv = canopy::rendezvous;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view list(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> hosts;
  try {
    hosts = rdv::expand_hostlist(list, "SLURM_JOB_NODELIST");
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "expand_hostlist");
    try {
      rdv::first_host_of_hostlist(list, "SLURM_JOB_NODELIST");
      check(false, "first_host_of_hostlist accepted a list expand_hostlist refused", e.what());
    } catch (const Error& again) {
      canopy::fuzz::check_refusal(again, ErrorCode::Config, "first_host_of_hostlist");
    }
    return 0;
  }
  check(!hosts.empty() && hosts.size() <= rdv::kMaxHostlistHosts, "host count outside 1..limit");
  check(rdv::first_host_of_hostlist(list, "V") == hosts.front(), "first host differs from the expansion's");
  for (const std::string& host : hosts) {
    check(!host.empty(), "an empty host");
    check(host.find_first_of("[], \t\n") == std::string::npos, "a host with a bracket, comma or space",
          host.c_str());
  }
  if (hosts.size() <= 1000) {
    std::string joined;
    for (const std::string& host : hosts) joined += (joined.empty() ? "" : ",") + host;
    check(rdv::expand_hostlist(joined, "V") == hosts, "the expanded hosts do not expand to themselves");
  }
  return 0;
}
