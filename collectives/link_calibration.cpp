#include "collectives/link_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::collectives {

std::string describe(const LinkModel& link) {
  return fmt::format("alpha {:.1f} us, beta {:.2f} GB/s, gamma {:.2f} GB/s", link.alpha * 1e6, 1e-9 / link.beta,
                     1e-9 / link.gamma);
}

namespace {

using Seconds = std::chrono::duration<double>;

// Probe messages travel as Bootstrap frames, numbered by `step` so that a late message of one probe
// can never be taken for another's.
enum ProbeStep : std::uint32_t { kToken = 0, kBulk = 1 };

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

int successor(const transport::Transport& t) { return (t.rank() + 1) % t.size(); }
int predecessor(const transport::Transport& t) { return (t.rank() + t.size() - 1) % t.size(); }

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
void exchange_around_ring(transport::Transport& t, const transport::Envelope& envelope, std::span<const std::byte> out,
                          std::span<std::byte> in, Deadline deadline) {
  t.post_recv(predecessor(t), envelope, in);
  t.post_send(successor(t), envelope, out);
  std::vector<transport::OpId> completed;
  while (completed.size() < 2) {
    if (!t.progress(deadline, completed))
      fail(ErrorCode::Timeout, "rank {}: the bandwidth probe of the cost model did not finish in time", t.rank());
  }
}

// Seconds per byte this rank achieved while every rank sent and received at once.
double probe_loaded_bandwidth(transport::Transport& t, std::uint64_t comm_id, double alpha, Deadline deadline) {
  // Larger than the caches: a 4 MiB probe ran 1.5 times faster than 64 MiB collectives then streamed.
  constexpr std::size_t kBytes = 16 << 20;
  constexpr int kRounds = 3;
  std::vector<std::byte> out(kBytes), in(kBytes);
  auto envelope = probe_envelope(comm_id, kBulk, kBytes);
  double fastest = 1e9;
  for (int round = 0; round < kRounds; ++round) {
    auto begin = Clock::now();
    exchange_around_ring(t, envelope, out, in, deadline);
    // Round 0 touches fresh pages and grows socket buffers: it does not count.
    if (round > 0) fastest = std::min(fastest, Seconds(Clock::now() - begin).count());
  }
  return std::max(fastest - alpha, 1e-9) / kBytes;
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

std::optional<LinkModel> fixed_model_from_environment() {
  auto text = env_value("CANOPY_COST_MODEL");
  if (!text) return std::nullopt;
  LinkModel link;
  if (std::sscanf(text->c_str(), "%lf,%lf,%lf", &link.alpha, &link.beta, &link.gamma) != 3 || link.alpha < 0 ||
      link.beta <= 0 || link.gamma < 0)
    fail(ErrorCode::Config,
         "CANOPY_COST_MODEL='{}' must be 'alpha,beta,gamma' (seconds, seconds per byte, seconds per byte)", *text);
  return link;
}

// Hex floats: exact, and the same figures on every rank.
std::string encode(const LinkModel& link) { return fmt::format("{:a},{:a},{:a}", link.alpha, link.beta, link.gamma); }

LinkModel decode(const std::string& text) {
  LinkModel link;
  if (std::sscanf(text.c_str(), "%la,%la,%la", &link.alpha, &link.beta, &link.gamma) != 3)
    fail(ErrorCode::Protocol, "malformed cost model '{}' in the store", text);
  return link;
}

}  // namespace

LinkModel calibrate_link_model(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                               Deadline deadline) {
  if (auto fixed = fixed_model_from_environment()) return *fixed;
  if (transport.size() < 2) return LinkModel{};
  auto timeout = [&] { return std::chrono::duration_cast<Duration>(deadline.remaining()); };

  double alpha = probe_hop_latency(transport, comm_id, deadline);
  LinkModel mine{alpha, probe_loaded_bandwidth(transport, comm_id, alpha, deadline), probe_reduce()};
  store.set(fmt::format("cost_model/{}", transport.rank()), encode(mine));

  const std::string combined_key = "cost_model";
  if (transport.rank() == 0) {
    LinkModel combined = mine;  // alpha is rank 0's; beta and gamma the slowest rank's
    for (int r = 1; r < transport.size(); ++r) {
      LinkModel theirs = decode(store.get(fmt::format("cost_model/{}", r), timeout()));
      combined.beta = std::max(combined.beta, theirs.beta);
      combined.gamma = std::max(combined.gamma, theirs.gamma);
    }
    store.set(combined_key, encode(combined));
    log::info("measured {}", describe(combined));
    return combined;
  }
  return decode(store.get(combined_key, timeout()));
}

}  // namespace canopy::collectives
