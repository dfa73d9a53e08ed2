// torch's env:// rendezvous has rank 0 host a TCPStore on MASTER_PORT, but canopy-run's own store already
// listens on the port it tells Canopy's ranks (CANOPY_MASTER_PORT): torch programs are told another one.
#pragma once

#include <cstdint>

#include "launcher/launch_options.hpp"

namespace canopy::launcher {

// One node: a port the kernel reports free now (torchrun --standalone does the same). Several nodes: the
// store's port + 1, computed alike on every node, so they agree without asking node 0. Throws canopy::Error
// when no such port exists.
std::uint16_t torch_master_port(const LaunchOptions& options, std::uint16_t store_port);

}  // namespace canopy::launcher
