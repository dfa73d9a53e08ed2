// Node 0's TcpStore, hosted by canopy-run for the whole job (every attempt), so that no rank has to host it
// and a restarted group finds it still there. The only piece of the launcher that needs the rendezvous layer.
#pragma once

#include <memory>
#include <string>

#include "canopy/store.hpp"
#include "launcher/launch_options.hpp"

namespace canopy::launcher {

// Listens on options.listen_addr (every address when empty) and options.master_port (0: a free port; the
// real one is server->port()). Throws canopy::Error naming the address when it cannot listen.
std::unique_ptr<TcpStoreServer> host_store(const LaunchOptions& options, const std::string& job_token);

}  // namespace canopy::launcher
