// canopy-p2p-bench: two processes on one host; throughput of large messages one way and both ways, and
// the round-trip latency of 8-byte messages, through Canopy's transport (TCP, or with --shm shared
// memory) and through a plain blocking loopback socket pair in the same run, side by side.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/p2p/links.hpp"
#include "canopy/store.hpp"
#include "common/error.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/tcp/socket.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::bench {
namespace {

using Seconds = std::chrono::duration<double>;

struct Config {
  std::size_t message_mib = 64;
  int messages = 16;
  int pings = 10000;
  int warmup = 1000;
  std::string ifname = "=lo";
  int spin_us = 0;
  bool shm = false;
};

struct Result {
  double one_way_gbs = 0;
  double both_ways_gbs = 0;  // each direction
  double rtt_median_us = 0;
  double rtt_p99_us = 0;
};

// Rank 0 times; rank 1 mirrors. One-way ends with an 8-byte answer so the time covers delivery.
Result measure(Link& link, int rank, const Config& config, std::vector<std::byte>& out,
               std::vector<std::byte>& in) {
  Result result;
  std::byte small_out[8] = {}, small_in[8] = {};
  const double bytes = static_cast<double>(out.size()) * config.messages;

  link.exchange(out, in);  // warm-up: connections, page tables, socket buffers grown by autotuning
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < config.messages; ++i) rank == 0 ? link.send(out) : link.recv(in);
  rank == 0 ? link.recv(small_in) : link.send(small_out);
  result.one_way_gbs = bytes / Seconds(std::chrono::steady_clock::now() - start).count() / 1e9;

  start = std::chrono::steady_clock::now();
  for (int i = 0; i < config.messages; ++i) link.exchange(out, in);
  result.both_ways_gbs = bytes / Seconds(std::chrono::steady_clock::now() - start).count() / 1e9;

  std::vector<double> rtt;
  rtt.reserve(static_cast<std::size_t>(config.pings));
  for (int i = 0; i < config.warmup + config.pings; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (rank == 0) {
      link.send(small_out);
      link.recv(small_in);
    } else {
      link.recv(small_in);
      link.send(small_out);
    }
    if (i >= config.warmup) rtt.push_back(Seconds(std::chrono::steady_clock::now() - t0).count() * 1e6);
  }
  std::sort(rtt.begin(), rtt.end());
  result.rtt_median_us = rtt[rtt.size() / 2];
  result.rtt_p99_us = rtt[std::min(rtt.size() - 1, rtt.size() * 99 / 100)];
  return result;
}

// The plain baseline's connection: rank 0 accepts on the listener made before the fork, rank 1 connects.
int plain_connection(int rank, int listener, const transport::SocketAddress& address) {
  int fd = -1;
  if (rank == 0) {
    fd = ::accept(listener, nullptr, nullptr);
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && ::connect(fd, address.get(), address.length) != 0) fail_errno("plain connect");
  }
  if (fd < 0) fail_errno("plain socket");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as Canopy does: fair latency
  return fd;
}

void print_table(const Config& config, const Result& canopy, const Result& plain) {
  auto row = [](const char* what, double c, double p, bool higher_is_better) {
    std::printf("%-34s %12.3f %14.3f %12.2f%s\n", what, c, p, c / p,
                higher_is_better ? "" : " (lower is better)");
  };
  std::printf("canopy-p2p-bench: 2 processes, Canopy over %s, %zu MiB x %d messages, %d round trips of 8 B\n",
              config.shm ? "shared memory" : "loopback TCP", config.message_mib, config.messages,
              config.pings);
  std::printf("%-34s %12s %14s %12s\n", "measurement", "canopy", "plain socket", "canopy/plain");
  row("one way, GB/s", canopy.one_way_gbs, plain.one_way_gbs, true);
  row("both ways, GB/s each direction", canopy.both_ways_gbs, plain.both_ways_gbs, true);
  row("8 B round trip median, us", canopy.rtt_median_us, plain.rtt_median_us, false);
  row("8 B round trip p99, us", canopy.rtt_p99_us, plain.rtt_p99_us, false);
}

void run_rank(int rank, const Config& config, std::uint16_t store_port, int listener,
              const transport::SocketAddress& plain_address, int result_pipe) {
  std::vector<std::byte> out(config.message_mib << 20, std::byte{0x42}),
      in(config.message_mib << 20, std::byte{0});

  auto store = connect_tcp_store("127.0.0.1", store_port, "p2p-bench", std::chrono::seconds(30));
  transport::TcpOptions options;
  options.comm_id = 1;
  options.job_token = "p2p-bench";
  options.socket_ifname = config.ifname;
  options.connect_timeout = std::chrono::seconds(30);
  options.spin = std::chrono::microseconds(config.spin_us);
  transport::ShmOptions shm;
  shm.comm_id = options.comm_id;
  shm.job_token = options.job_token;
  shm.host_of_rank = {0, 0};
  auto transport = config.shm ? transport::connect_shm_tcp_mesh(*store, rank, 2, options, shm)
                              : transport::connect_tcp_mesh(*store, rank, 2, options);
  CanopyLink canopy_link(*transport);
  Result canopy = measure(canopy_link, rank, config, out, in);

  transport::UniqueFd plain_fd(plain_connection(rank, listener, plain_address));
  PlainSocketLink plain_link(plain_fd.get());
  Result plain = measure(plain_link, rank, config, out, in);

  if (rank == 0) {
    Result both[2] = {canopy, plain};
    if (::write(result_pipe, both, sizeof(both)) != static_cast<ssize_t>(sizeof(both)))
      fail_errno("result pipe");
  }
}

}  // namespace
}  // namespace canopy::bench

int main(int argc, char** argv) {
  using namespace canopy;
  bench::Config config;
  CLI::App app{
      "canopy-p2p-bench: Canopy's transport (TCP, or shared memory) against a plain socket, between 2 local "
      "processes"};
  app.add_option("--message-mib", config.message_mib, "size of the large messages, MiB")
      ->check(CLI::Range(1, 4096));
  app.add_option("--messages", config.messages, "large messages per throughput test")
      ->check(CLI::Range(1, 100000));
  app.add_option("--pings", config.pings, "8-byte round trips measured")->check(CLI::Range(1, 10000000));
  app.add_option("--warmup", config.warmup, "8-byte round trips before measuring")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--ifname", config.ifname, "CANOPY_SOCKET_IFNAME for Canopy's mesh");
  app.add_option("--spin-us", config.spin_us,
                 "Canopy busy-polls this long before blocking (TcpOptions::spin)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--shm", config.shm, "Canopy's messages go through shared memory (shm+tcp), not loopback TCP");
  CLI11_PARSE(app, argc, argv);

  try {
    TcpStoreServer server("127.0.0.1", 0, "p2p-bench");
    auto plain_address = transport::SocketAddress::parse("127.0.0.1:0");
    transport::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::bind(listener.get(), plain_address.get(), plain_address.length) != 0 ||
        ::listen(listener.get(), 4) != 0)
      fail_errno("plain listener");
    plain_address = transport::SocketAddress::local_of(listener.get());
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) fail_errno("pipe");

    std::fflush(nullptr);
    pid_t children[2];
    for (int rank = 0; rank < 2; ++rank) {
      children[rank] = ::fork();
      if (children[rank] < 0) fail_errno("fork");
      if (children[rank] == 0) {
        int status = 0;
        try {
          bench::run_rank(rank, config, server.port(), listener.get(), plain_address, pipe_fds[1]);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "canopy-p2p-bench rank %d: %s\n", rank, e.what());
          status = 1;
        }
        std::fflush(nullptr);
        _exit(status);
      }
    }
    ::close(pipe_fds[1]);
    bench::Result results[2];
    bool got = ::read(pipe_fds[0], results, sizeof(results)) == static_cast<ssize_t>(sizeof(results));
    bool ok = got;
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    if (!ok) {
      std::fprintf(stderr, "canopy-p2p-bench: a rank failed (see above)\n");
      return 1;
    }
    bench::print_table(config, results[0], results[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-p2p-bench: %s\n", e.what());
    return 1;
  }
}
