// canopy-run raises its soft RLIMIT_NOFILE to the hard limit before it starts anything: its ranks inherit
// it (each holds a socket per peer, in two meshes), and so does the store it hosts (a socket per rank),
// which a login shell's 1024 would stop at a few hundred ranks.
#pragma once

#include <sys/resource.h>

#include <string>

namespace canopy::launcher {

// The soft limit to ask for: the hard one, or the kernel's ceiling for one process (`nr_open`,
// /proc/sys/fs/nr_open) when the hard one is unlimited, since no soft limit may exceed that.
rlim_t descriptor_limit_target(rlim_t hard, rlim_t nr_open);

// What raise_descriptor_limit did.
struct DescriptorLimitRaise {
  rlim_t before = 0;    // the soft limit it found
  rlim_t after = 0;     // the soft limit now
  std::string problem;  // why it could not raise it, "" when it did or had nothing to do
};

// Raises this process's soft limit to descriptor_limit_target, never lowers it; says what it did in one
// line at CANOPY_DEBUG=INFO.
DescriptorLimitRaise raise_descriptor_limit();

}  // namespace canopy::launcher
