// Unix sockets between the ranks of a host: SOCK_SEQPACKET (one packet per message, its boundaries kept)
// in the abstract namespace (a name, never a file: nothing to clean up after a crash), carrying file
// descriptors (SCM_RIGHTS) alongside. Each pair of ranks keeps one open for the job's life: it brings the
// rings' memfds and the doorbells, and its end of stream says at once that the peer died.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "common/deadline.hpp"
#include "transport/tcp/socket.hpp"

namespace canopy::transport {

// A non-blocking listener on a fresh abstract name, which `name` receives (printable: "canopy-<pid>-<hex>").
// Throws Error(System) when the socket cannot be made, Error(Resource) naming `need` (what the caller
// holds open, common/fd_limit.hpp) when out of descriptors.
UniqueFd listen_unix(int backlog, std::string& name, std::string_view need = {});

// A non-blocking socket connected to the listener of that name; an invalid one when there is none in
// this network namespace (then `error` holds the errno). Out of descriptors: Error(Resource) naming `need`.
UniqueFd connect_unix(const std::string& name, int& error, std::string_view need = {});

// Sends one packet, with `pass` (when valid) alongside. Returns 0 or the errno (EAGAIN when full).
int send_packet(int fd, std::span<const std::byte> bytes, int pass = -1);

// Receives one packet into `bytes` without waiting: its length, 0 at the end of the stream, or -errno
// (-EAGAIN when none is there). A descriptor that came with it lands in `received` (close-on-exec).
long receive_packet(int fd, std::span<std::byte> bytes, UniqueFd& received);

// Waits for `fd` to become readable; false at the deadline.
bool wait_readable(int fd, Deadline deadline);

// The user the process at the other end runs as (SO_PEERCRED); -1 when the kernel does not say.
uid_t peer_user(int fd);
// That process's id as this process's pid namespace sees it; 0 when it cannot see it.
pid_t peer_process(int fd);

}  // namespace canopy::transport
