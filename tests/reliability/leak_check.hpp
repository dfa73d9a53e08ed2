// What a process holds (descriptors, threads, shared-memory rings), to check that a failed communicator
// leaves nothing behind once destroyed; under AddressSanitizer, also a leak check of the heap at that moment.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>

namespace canopy::reliability {

struct Holdings {
  int descriptors = 0;  // entries of /proc/self/fd
  int threads = 0;      // entries of /proc/self/task
  int rings = 0;        // mappings of shared-memory rings in /proc/self/maps
};

Holdings current_holdings();

// "leaked nothing", or what is held beyond `before` ("LEAKED 2 descriptors, 1 threads, 2 rings, heap").
std::string leaks_since(const Holdings& before);

// Resident memory of a process in bytes (VmRSS of /proc/<pid>/status); -1 when it cannot be read.
long long resident_bytes(pid_t pid = ::getpid());

}  // namespace canopy::reliability
