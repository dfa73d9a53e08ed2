#include "launcher/job_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <exception>

#include "common/deadline.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/console.hpp"

namespace canopy::launcher {
namespace {

// Outside the "round/<n>" prefixes the ranks use, so that no rank's key can collide with it.
constexpr const char* kFinishedNodesKey = "canopy-run/finished-nodes";
// Node 0 keeps the store up for the others, so it is there or gone for good: no need to wait long for it.
constexpr std::chrono::seconds kConnectLimit{3};
constexpr int kPollIntervalMs = 100;

}  // namespace

std::string local_store_host(const LaunchOptions& options) {
  return options.listen_addr.empty() ? "127.0.0.1" : options.listen_addr;
}

std::string generate_job_token() {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open /dev/urandom for the job token");
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail_errno("cannot read /dev/urandom for the job token", err);
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);

  constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 0xf]);
  }
  return token;
}

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
