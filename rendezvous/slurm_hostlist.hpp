// SLURM's hostlist syntax, as in SLURM_JOB_NODELIST and SLURM_STEP_NODELIST: host names separated by
// commas, where a bracket stands for a list of numbers or ranges, zero-padded to the width of the range's
// first number ("node[01-04,07],gpu3" is node01 node02 node03 node04 node07 gpu3), and several brackets in
// one name multiply ("rack[1-2]-n[1-2]" is rack1-n1 rack1-n2 rack2-n1 rack2-n2), as `scontrol show
// hostnames` expands them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::rendezvous {

// More hosts than this in one list is refused, so that a hostile list cannot exhaust memory.
inline constexpr std::size_t kMaxHostlistHosts = 1 << 20;

// Every host of `list`, in SLURM's order (a name's first bracket varies slowest). Throws Error(Config)
// naming `origin` (the variable it came from), the list and what is wrong at which position: an empty list
// or name, an unclosed or stray bracket, text after a name's last bracket (SLURM refuses it too), a range
// that is not "N" or "N-M" with N <= M in decimal digits, or more than `max_hosts` hosts (counted before
// any is made; never more than kMaxHostlistHosts).
std::vector<std::string> expand_hostlist(std::string_view list, std::string_view origin,
                                         std::size_t max_hosts = kMaxHostlistHosts);

// The first host of `list`, without expanding the rest; the whole list is checked as expand_hostlist does.
std::string first_host_of_hostlist(std::string_view list, std::string_view origin);

}  // namespace canopy::rendezvous
