// A mesh of processes: forked ranks that meet through a TcpStore and connect a transport mesh, for the
// transport tests (TCP and verbs alike; the test says how to connect).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "canopy/store.hpp"
#include "tests/support/ranks.hpp"
#include "transport/transport.hpp"

namespace canopy::testing {

// Connects rank `rank` of `size` to the others through `store`: connect_tcp_mesh, connect_verbs_mesh...
using MeshConnector = std::function<std::unique_ptr<transport::Transport>(Store& store, int rank, int size)>;
using MeshBody = std::function<void(transport::Transport& t)>;

// Starts a TcpStore server in a process of its own (StoreServerProcess: no server thread runs here while
// the ranks fork), forks `size` ranks that each connect to it, form the mesh with `connect` and run
// `body`; returns how each rank ended (run_processes: a rank that throws exits 1, a late one is killed).
std::vector<RankExit> run_mesh_processes(int size, const MeshConnector& connect, const MeshBody& body,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace canopy::testing
