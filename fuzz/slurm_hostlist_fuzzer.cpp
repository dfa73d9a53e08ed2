// SLURM's hostlist parser (rendezvous/slurm_hostlist.hpp) on arbitrary text.
// Properties: refusals are Error(Config) only, and both functions refuse the same lists (but for the size
// limit); an accepted list names between 1 and the limit hosts, each a non-empty name without brackets,
// commas or spaces; the first host is the expansion's first; and the expanded hosts, joined by commas, are
// a hostlist that expands to themselves.
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

// Expansions are kept small so that the search spends its time on syntax, not on making a million names;
// the limit itself is then exercised the more.
constexpr std::size_t kFuzzMaxHosts = 4096;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view list(reinterpret_cast<const char*>(data), size);
  std::string first;
  try {
    first = rdv::first_host_of_hostlist(list, "SLURM_JOB_NODELIST");
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "first_host_of_hostlist");
    try {
      rdv::expand_hostlist(list, "SLURM_JOB_NODELIST", kFuzzMaxHosts);
      check(false, "expand_hostlist accepted a list first_host_of_hostlist refused", e.what());
    } catch (const Error& again) {
      canopy::fuzz::check_refusal(again, ErrorCode::Config, "expand_hostlist");
    }
    return 0;
  }
  std::vector<std::string> hosts;
  try {
    hosts = rdv::expand_hostlist(list, "SLURM_JOB_NODELIST", kFuzzMaxHosts);
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "expand_hostlist");
    check(std::string_view(e.what()).find("more than 4096 hosts") != std::string_view::npos,
          "a list with a first host refused for something other than its size", e.what());
    return 0;
  }
  check(!hosts.empty() && hosts.size() <= kFuzzMaxHosts, "host count outside 1..limit");
  check(first == hosts.front(), "the first host differs from the expansion's");
  for (const std::string& host : hosts) {
    check(!host.empty(), "an empty host");
    check(host.find_first_of("[], \t\n") == std::string::npos, "a host with a bracket, comma or space",
          host.c_str());
  }
  std::string joined;
  for (const std::string& host : hosts) joined += (joined.empty() ? "" : ",") + host;
  check(rdv::expand_hostlist(joined, "V", kFuzzMaxHosts) == hosts,
        "the expanded hosts do not expand to themselves");
  return 0;
}
