// The CPUs a process may run on, and the kernel's "cpulist" text for them ("0-3,8", as /sys/devices and
// `taskset -c` write it): how a rank tells the others which cores it can use, so that ranks bound to one
// core each still add up to the host's cores.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace canopy {

// sched_getaffinity of the calling thread (honours taskset, cgroup cpusets and a launcher's binding),
// sorted; every CPU up to std::thread::hardware_concurrency() where that call fails. Never empty.
std::vector<int> allowed_cpus();

// How many CPUs this process may run on: allowed_cpus().size(), at least 1. A rank bound to one core sees 1:
// the group's view of a host is the union of its ranks' CPUs (the host layout).
int usable_cores();

// Sorted and unique in, "0-3,8" out ("" for none).
std::string format_cpu_list(const std::vector<int>& cpus);

// "0-3,8" -> {0, 1, 2, 3, 8}, sorted and unique. Error(Protocol) for anything else (a malformed entry from
// a peer), naming the text.
std::vector<int> parse_cpu_list(std::string_view text);

}  // namespace canopy
