// The memory ranks of one host share: a memfd, private to this user, backed in full before anyone maps it,
// and passed to the peers over their Unix socket (never a name in /dev/shm: nothing outlives the processes
// that map it). The rings (shm_ring.hpp) and the host's cells (host_cells.hpp) are made of these.
#pragma once

#include <cstddef>
#include <string>

#include "transport/tcp/socket.hpp"

namespace canopy::transport {

// A new memfd of `bytes`, mode 0600, allocated up front (fallocate: a segment the kernel cannot back
// fails here, with a message, rather than with SIGBUS at its first write) and sealed at that size.
// `what` names it in errors ("a 4 MiB ring"). Throws Error(System).
UniqueFd create_shared_memory(const char* name, std::size_t bytes, const std::string& what);

// Checks that an offered memfd is what its peer announced: a regular file of `bytes`, this user's, mode
// 0600. Throws Error(Protocol) saying what differs.
void check_offered_memory(int fd, std::size_t bytes, const std::string& what);

// Maps it shared, every page faulted in now (a fresh page costs ~12 us at its first touch), and not
// inherited by a fork() of this process (a trainer's data loader). Throws Error(System).
std::byte* map_shared_memory(int fd, std::size_t bytes);

}  // namespace canopy::transport
