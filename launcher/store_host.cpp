#include "launcher/store_host.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::launcher {

std::unique_ptr<TcpStoreServer> host_store(const LaunchOptions& options, const std::string& job_token) {
  const std::string shown_addr = options.listen_addr.empty() ? "every address" : options.listen_addr;
  try {
    auto server = std::make_unique<TcpStoreServer>(options.listen_addr, options.master_port, job_token);
    log::info("canopy-run: hosting the store on {} port {}", shown_addr, server->port());
    return server;
  } catch (const Error& e) {
    fail(e.code(), "cannot host the store on {} port {} (--master-port): {}", shown_addr, options.master_port,
         e.what());
  }
}

}  // namespace canopy::launcher
