// Whether a rank's process has ended, asked of the kernel where the asker shares it: what lets a shrink
// leave out a rank killed on this host at once, instead of after its heartbeat timeout (peer_silence.hpp).
//
// A process is named by its kernel's boot id, its pid namespace, its pid and its start time, so that a
// pid reused by another process, a container with a pid namespace of its own, or another machine with
// the same host name is never taken for it: only an asker in the same kernel and namespace judges.
#pragma once

#include <string>

namespace canopy {

// "<boot id> <pid namespace> <pid> <start time>", or "" where /proc cannot tell.
std::string this_process_identity();

// How the process named by `identity` ended ("has exited (pid 1234 on this host)"), or "" when it may
// be running, or when this process cannot tell (another kernel or namespace, an unreadable record).
std::string process_end(const std::string& identity);

// Whether `identity` names the process `pid` of this kernel and pid namespace (a child of this
// process, say); false for one this_process_identity() never wrote.
bool names_process(const std::string& identity, long pid);

// This process's kernel and network namespace, "<boot id>/<namespace inode>"; empty where /proc does not
// say. Processes that share it can reach each other's Unix sockets and so share memory (shm/); the same
// host name with another value is another host as far as the links can tell (a container, a namespace).
std::string this_network_namespace();

}  // namespace canopy
