// canopy-communicator-p2p-bench: a communicator's point-to-point messages between two ranks, run under a
// launcher:
//
//   canopy-run --nproc 2 canopy-communicator-p2p-bench --mib 64 --messages 8 --pings 2000
//
// Prints the first round trip (which connects the pair's point-to-point link: what sharing the collectives'
// links could save, once per pair), the round-trip time of 8-byte send/recv pairs (median, p99), the
// throughput of large messages one way (recv's), and both ways at once (send_async + recv_async on each
// rank), and the round trip again while an asynchronous all-reduce runs on the same communicator (what a
// pipeline stage sees beside its gradient all-reduce). canopy-p2p-bench measures the transport underneath;
// this measures the engine and progress thread that Communicator::send and recv go through.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <vector>

#include "canopy/canopy.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Round trips of 8 bytes, rank 0 timing each; the median and p99 in microseconds.
std::pair<double, double> round_trips(canopy::Communicator& comm, int pings) {
  std::vector<std::byte> out(8), in(8);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(pings));
  const int peer = 1 - comm.rank();
  for (int i = 0; i < pings; ++i) {
    const auto start = Clock::now();
    if (comm.rank() == 0) {
      comm.send(out, peer, 1);
      comm.recv(in, peer, 1);
    } else {
      comm.recv(in, peer, 1);
      comm.send(out, peer, 1);
    }
    times.push_back(seconds_since(start) * 1e6);
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times[times.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a communicator's point-to-point latency and throughput between two ranks"};
  std::size_t mib = 64;
  int messages = 8;
  int pings = 2000;
  std::size_t reduce_kib = 16384;
  app.add_option("--mib", mib, "size of each large message in MiB")->check(CLI::PositiveNumber);
  app.add_option("--messages", messages, "large messages per direction")->check(CLI::PositiveNumber);
  app.add_option("--pings", pings, "8-byte round trips")->check(CLI::PositiveNumber);
  app.add_option("--reduce-kib", reduce_kib, "size of the all-reduces beside the round trips in KiB")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  auto comm = canopy::Communicator::from_environment();
  if (comm.size() != 2) {
    fmt::print(stderr, "canopy-communicator-p2p-bench runs on 2 ranks, not {}\n", comm.size());
    return 2;
  }
  const int peer = 1 - comm.rank();
  std::vector<std::byte> out(mib << 20), in(mib << 20);
  std::vector<std::byte> small(8);

  comm.barrier();  // the collectives' links are up; the point-to-point ones are not
  const double first_rtt = round_trips(comm, 1).first;
  round_trips(comm, std::max(1, pings / 10));  // warm-up
  const auto [rtt_median, rtt_p99] = round_trips(comm, pings);

  comm.barrier();
  auto start = Clock::now();
  for (int i = 0; i < messages; ++i) comm.rank() == 0 ? comm.send(out, peer, 2) : comm.recv(in, peer, 2);
  comm.rank() == 0 ? comm.recv(small, peer, 3) : comm.send(small, peer, 3);  // the time covers delivery
  const double one_way = static_cast<double>(out.size()) * messages / seconds_since(start) / 1e9;

  comm.barrier();
  start = Clock::now();
  for (int i = 0; i < messages; ++i) {
    canopy::Work sent = comm.send_async(out, peer, 4);
    comm.recv_async(in, peer, 4).wait();
    sent.wait();
  }
  const double both_ways = static_cast<double>(out.size()) * messages / seconds_since(start) / 1e9;

  // Round trips beside asynchronous all-reduces (16 MiB of floats unless --reduce-kib), one always in flight: every 8 round
  // trips the last one is waited for and the next started (the same on both ranks, so they issue the same
  // collectives).
  comm.barrier();
  std::vector<float> gradients((reduce_kib << 10) / sizeof(float), 1.0f);
  canopy::Work reduce = comm.all_reduce_async(std::span(gradients));
  int reduces = 1;
  std::vector<double> beside;
  for (int i = 0; i < pings / 4; ++i) {
    beside.push_back(round_trips(comm, 1).first);
    if (i % 8 == 7) {
      reduce.wait();
      reduce = comm.all_reduce_async(std::span(gradients));
      ++reduces;
    }
  }
  reduce.wait();
  std::sort(beside.begin(), beside.end());

  if (comm.rank() == 0)
    fmt::print(
        "transport {}: first round trip {:.0f} us; 8-byte round trip median {:.1f} us, p99 {:.1f} us; {} MiB "
        "messages one way {:.2f} GB/s, "
        "both ways {:.2f} GB/s each; round trip beside all-reduces median {:.1f} us ({} all-reduces)\n",
        comm.transport_name(), first_rtt, rtt_median, rtt_p99, mib, one_way, both_ways,
        beside[beside.size() / 2], reduces);
  return 0;
}
