#include "launcher/node_sync.hpp"

#include <poll.h>

#include <exception>
#include <memory>
#include <string>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "common/log.hpp"
#include "launcher/console.hpp"

namespace canopy::launcher {
namespace {

// Outside the "round/<n>" prefixes the ranks use, so that no rank's key can collide with it.
constexpr const char* kFinishedNodesKey = "canopy-run/finished-nodes";
// Node 0 keeps the store up for the others, so it is there or gone for good: no need to wait long for it.
constexpr std::chrono::seconds kConnectLimit{3};
constexpr int kPollIntervalMs = 100;

// Node 0 reaches its own store through the address it listens on (loopback when it listens everywhere).
std::string local_store_host(const LaunchOptions& options) {
  return options.listen_addr.empty() ? "127.0.0.1" : options.listen_addr;
}

}  // namespace

void report_node_finished(const LaunchOptions& options, const LaunchRound& round) {
  try {
    auto store = connect_tcp_store(options.master_addr, round.master_port, round.job_token, kConnectLimit);
    store->add(kFinishedNodesKey, 1);
    log::info("canopy-run: told node 0 that node {} is done with the store", options.node_rank);
  } catch (const std::exception& e) {
    log::info("canopy-run: could not tell node 0 that node {} is done (it may have ended already): {}",
              options.node_rank, e.what());
  }
}

void wait_for_other_nodes(const LaunchOptions& options, const LaunchRound& round, SignalWatch& signals,
                          std::chrono::milliseconds limit) {
  const int others = options.nnodes - 1;
  try {
    auto store =
        connect_tcp_store(local_store_host(options), round.master_port, round.job_token, kConnectLimit);
    Deadline deadline = Deadline::after(limit);
    std::int64_t finished = 0;
    bool told = false;
    while ((finished = store->add(kFinishedNodesKey, 0)) < others) {
      if (deadline.expired()) {
        report("{} of {} other nodes did not report their end within {} s; closing the store anyway",
               others - finished, others, std::chrono::duration_cast<std::chrono::seconds>(limit).count());
        return;
      }
      if (!told) {
        log::info("canopy-run: keeping the store up until every other node is done with it ({} of {} so far)",
                  finished, others);
        told = true;
      }
      pollfd waiter{signals.fd(), POLLIN, 0};
      if (::poll(&waiter, 1, kPollIntervalMs) > 0) {
        for (int signal : signals.take()) {
          if (SignalWatch::is_stop_request(signal)) {
            report("received a stop request; closing the store without waiting for the other nodes");
            return;
          }
        }
      }
    }
  } catch (const std::exception& e) {
    report("cannot wait for the other nodes to finish with the store: {}", e.what());
  }
}

}  // namespace canopy::launcher
