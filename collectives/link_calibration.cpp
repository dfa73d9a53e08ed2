#include "collectives/link_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::collectives {

std::string describe(const LinkModel& link) {
  std::string text = fmt::format("alpha {:.1f} us, beta {:.2f} GB/s", link.alpha * 1e6, 1e-9 / link.beta);
  if (link.eager_bytes > 0)
    text += fmt::format(" ({:.2f} GB/s up to {} KiB)", 1e-9 / link.beta_eager, link.eager_bytes >> 10);
  text += fmt::format(", gamma {:.2f} GB/s", 1e-9 / link.gamma);
  const HostLayout& hosts = link.hosts;
  for (int host = 0; host < static_cast<int>(hosts.cores_of_host.size()); ++host) {
    if (hosts.shares_cores(host))
      text +=
          fmt::format("; host {}: {} ranks share {} cores", host, hosts.ranks_on(host), hosts.cores_of(host));
  }
  return text;
}

namespace {

using Seconds = std::chrono::duration<double>;

// Probe messages travel as Bootstrap frames, numbered by `step` so that a late message of one probe
// can never be taken for another's.
enum ProbeStep : std::uint32_t { kToken = 0, kBulk = 1, kEager = 2, kSizing = 3 };

transport::Envelope probe_envelope(std::uint64_t comm_id, ProbeStep step, std::uint64_t bytes) {
  transport::Envelope e;
  e.comm_id = comm_id;
  e.collective = Collective::Bootstrap;
  e.count = bytes;
  e.step = step;
  return e;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The mean of the middle half: neither a lucky round nor one stalled for a whole time slice moves it much.
double interquartile_mean(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t drop = values.size() / 4;
  double sum = 0;
  for (std::size_t i = drop; i < values.size() - drop; ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 2 * drop);
}

int successor(const transport::Transport& t) {
  return (t.rank() + 1) % t.size();
}
int predecessor(const transport::Transport& t) {
  return (t.rank() + t.size() - 1) % t.size();
}

// Seconds per hop, on rank 0 (zero elsewhere): rank 0 times a token's trips around the ring.
double probe_hop_latency(transport::Transport& t, std::uint64_t comm_id, Deadline deadline) {
  constexpr int kTrips = 30;
  std::vector<std::byte> token(8);
  auto envelope = probe_envelope(comm_id, kToken, token.size());
  std::vector<double> trips;
  for (int i = 0; i < kTrips; ++i) {
    auto begin = Clock::now();
    if (t.rank() == 0) {
      transport::send(t, successor(t), envelope, token, deadline);
      transport::recv(t, predecessor(t), envelope, token, deadline);
    } else {
      transport::recv(t, predecessor(t), envelope, token, deadline);
      transport::send(t, successor(t), envelope, token, deadline);
    }
    trips.push_back(Seconds(Clock::now() - begin).count());
  }
  // The first trips warm up connections and caches: the median ignores them.
  return t.rank() == 0 ? median(trips) / t.size() : 0.0;
}

// Sends `out` to the successor while receiving `in` from the predecessor.
void exchange_around_ring(transport::Transport& t, const transport::Envelope& envelope,
                          std::span<const std::byte> out, std::span<std::byte> in, Deadline deadline) {
  t.post_recv(predecessor(t), envelope, in);
  t.post_send(successor(t), envelope, out);
  std::vector<transport::OpId> completed;
  while (completed.size() < 2) {
    if (!t.progress(deadline, completed))
      fail(ErrorCode::Timeout, "rank {}: the bandwidth probe of the cost model did not finish in time",
           t.rank());
  }
}

// Seconds per byte of one message of `bytes`, as this rank saw it while every rank sent and received
// at once: the mean of the middle half of `rounds` exchanges after a first that does not count, its hop
// latency taken off, divided by the turns its host's ranks took for the cores. The middle half, because a
// collective meets the scheduler's typical orders, not its luckiest (docs/SCHEDULES.md, *The start-up probes*).
double probe_loaded_bandwidth(transport::Transport& t, std::uint64_t comm_id, ProbeStep step,
                              std::size_t bytes, int rounds, double alpha, int turns, Deadline deadline) {
  std::vector<std::byte> out(bytes), in(bytes);
  auto envelope = probe_envelope(comm_id, step, bytes);
  std::vector<double> times;
  for (int round = 0; round <= rounds; ++round) {
    auto begin = Clock::now();
    exchange_around_ring(t, envelope, out, in, deadline);
    if (round > 0) times.push_back(Seconds(Clock::now() - begin).count());
  }
  return std::max(interquartile_mean(times) / turns - alpha, 1e-9) / static_cast<double>(bytes);
}

double probe_reduce() {
  constexpr std::size_t kCount = 1 << 20;  // 4 MiB of float32
  std::vector<float> dst(kCount, 1.0f), src(kCount, 2.0f);
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    auto begin = Clock::now();
    reduce_into(DataType::Float32, ReduceOp::Sum, dst.data(), src.data(), kCount);
    best = std::min(best, Seconds(Clock::now() - begin).count());
  }
  return best / (kCount * sizeof(float));
}

}  // namespace

LinkModel parse_cost_model(std::string_view given) {
  const std::string text(given);  // sscanf needs the terminating zero
  LinkModel link;
  unsigned long long eager_bytes = 0;
  int used = -1;
  bool whole = std::sscanf(text.c_str(), "%lf,%lf,%lf,%lf,%llu%n", &link.alpha, &link.beta, &link.gamma,
                           &link.beta_eager, &eager_bytes, &used) == 5 &&
               used == static_cast<int>(text.size());
  if (!whole) {
    used = -1;
    whole = std::sscanf(text.c_str(), "%lf,%lf,%lf%n", &link.alpha, &link.beta, &link.gamma, &used) == 3 &&
            used == static_cast<int>(text.size());
    link.beta_eager = link.beta;
    eager_bytes = 0;
  }
  link.eager_bytes = eager_bytes;
  if (!whole || !(link.alpha >= 0) || !(link.beta > 0) || !(link.gamma >= 0) || !(link.beta_eager > 0))
    fail(ErrorCode::Config,
         "CANOPY_COST_MODEL='{}' is not a cost model: use 'alpha,beta,gamma' or "
         "'alpha,beta,gamma,beta_eager,eager_bytes' (seconds, seconds per byte, seconds per byte, seconds per "
         "byte, bytes; alpha and gamma at least 0, beta and beta_eager above 0), such as 2e-5,1e-9,1e-10",
         text);
  return link;
}

namespace {

// Hex floats: exact, and the same figures on every rank.
std::string encode(const LinkModel& link) {
  return fmt::format("{:a},{:a},{:a},{:a},{}", link.alpha, link.beta, link.gamma, link.beta_eager,
                     link.eager_bytes);
}

LinkModel decode(const std::string& text) {
  LinkModel link;
  unsigned long long eager_bytes = 0;
  if (std::sscanf(text.c_str(), "%la,%la,%la,%la,%llu", &link.alpha, &link.beta, &link.gamma,
                  &link.beta_eager, &eager_bytes) != 5)
    fail(ErrorCode::Protocol, "malformed cost model '{}' in the store", text);
  link.eager_bytes = eager_bytes;
  return link;
}

// What a loopback socket takes without waiting for its reader, once the stream probe grew its buffers: a
// message up to this size moves at the eager rate (docs/SCHEDULES.md, *Eager bytes*, says why 1 MiB).
constexpr std::size_t kEagerBytes = 1 << 20;

// How the two bandwidth probes run, the same on every rank: every rank times one kEagerBytes exchange, and
// rank 0 plans both probes by the slowest rank's pace, so that slow links never make start-up take seconds
// (docs/SCHEDULES.md, *The start-up probes*).
struct ProbePlan {
  std::size_t stream_bytes = 0;
  int eager_rounds = 0;
};

ProbePlan agree_on_probe_plan(transport::Transport& t, Store& store, std::uint64_t comm_id,
                              Deadline deadline) {
  constexpr std::size_t kSizingBytes = kEagerBytes;
  constexpr std::size_t kMostBytes = 16 << 20;
  constexpr double kRoundSeconds = 0.25;
  constexpr int kMostEagerRounds = 16, kFewestEagerRounds = 3;
  constexpr double kEagerProbeSeconds = 0.5;
  std::vector<std::byte> out(kSizingBytes), in(kSizingBytes);
  auto begin = Clock::now();
  exchange_around_ring(t, probe_envelope(comm_id, kSizing, kSizingBytes), out, in, deadline);
  const double mine = Seconds(Clock::now() - begin).count();

  auto plan_the_probes = [&](const std::vector<std::string>& times) {
    double slowest = 0;
    for (std::size_t r = 0; r < times.size(); ++r) {
      double seconds = 0;
      if (std::sscanf(times[r].c_str(), "%la", &seconds) != 1 || !(seconds >= 0))
        fail(ErrorCode::Protocol, "malformed probe time '{}' from rank {} in the store", times[r], r);
      slowest = std::max(slowest, seconds);
    }
    std::size_t bytes = kMostBytes;
    while (bytes > kSizingBytes && slowest * static_cast<double>(bytes / kSizingBytes) > kRoundSeconds)
      bytes /= 2;
    const double affordable = slowest > 0 ? kEagerProbeSeconds / slowest : kMostEagerRounds;
    return fmt::format(
        "{} {}", bytes,
        static_cast<int>(std::clamp<double>(affordable, kFewestEagerRounds, kMostEagerRounds)));
  };
  const std::string text = rendezvous::agree_through_rank_zero(store, "probe_plan", t.rank(), t.size(),
                                                               fmt::format("{:a}", mine), plan_the_probes);
  ProbePlan plan;
  if (std::sscanf(text.c_str(), "%zu %d", &plan.stream_bytes, &plan.eager_rounds) != 2 ||
      plan.stream_bytes < kSizingBytes || plan.stream_bytes > kMostBytes ||
      plan.eager_rounds < kFewestEagerRounds || plan.eager_rounds > kMostEagerRounds)
    fail(ErrorCode::Protocol, "malformed probe plan '{}' in the store", text);
  return plan;
}

// alpha is rank 0's (only rank 0 times the token); beta, beta_eager and gamma the slowest rank's.
std::string combine(const std::vector<std::string>& measured) {
  LinkModel combined = decode(measured.front());
  for (std::size_t r = 1; r < measured.size(); ++r) {
    const LinkModel theirs = decode(measured[r]);
    combined.beta = std::max(combined.beta, theirs.beta);
    combined.beta_eager = std::max(combined.beta_eager, theirs.beta_eager);
    combined.gamma = std::max(combined.gamma, theirs.gamma);
  }
  // A byte that fits the socket never costs more than one that streams (a noisy probe aside).
  combined.beta_eager = std::min(combined.beta_eager, combined.beta);
  return encode(combined);
}

LinkModel measure(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                  const HostLayout& hosts, Deadline deadline) {
  const int turns = hosts.turns_when_all_busy(hosts.host_of(transport.rank()));

  LinkModel mine;
  mine.alpha = probe_hop_latency(transport, comm_id, deadline);
  const ProbePlan plan = agree_on_probe_plan(transport, store, comm_id, deadline);
  mine.beta =
      probe_loaded_bandwidth(transport, comm_id, kBulk, plan.stream_bytes, 3, mine.alpha, turns, deadline);
  mine.beta_eager = probe_loaded_bandwidth(transport, comm_id, kEager, kEagerBytes, plan.eager_rounds,
                                           mine.alpha, turns, deadline);
  mine.eager_bytes = kEagerBytes;
  mine.gamma = probe_reduce();
  return decode(rendezvous::agree_through_rank_zero(store, "cost_model", transport.rank(), transport.size(),
                                                    encode(mine), combine));
}

}  // namespace

LinkModel calibrate_link_model(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                               const HostLayout& hosts, std::string_view fixed_text, Deadline deadline) {
  LinkModel link;
  if (!fixed_text.empty())
    link = parse_cost_model(fixed_text);
  else if (transport.size() >= 2)
    link = measure(transport, store, comm_id, hosts, deadline);
  link.hosts = hosts;
  if (transport.rank() == 0) log::info("cost model: {}", describe(link));
  return link;
}

}  // namespace canopy::collectives
