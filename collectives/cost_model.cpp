#include "collectives/cost_model.hpp"

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

AlgorithmChoice CostModel::choose(const CollectiveCall& call, std::size_t element_size) {
  Key key{call.collective, call.count, call.root, call.chunk_count, element_size};
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;

  AlgorithmChoice best;
  std::string explanation;
  for (const Algorithm& candidate : algorithms(call.collective)) {
    double seconds = predict_seconds(candidate, call, element_size, link_);
    explanation += fmt::format("{}{} {:.1f} us", explanation.empty() ? "" : ", ", candidate.name, seconds * 1e6);
    if (best.algorithm == nullptr || seconds < best.predicted_seconds) {
      best.algorithm = &candidate;
      best.predicted_seconds = seconds;
    }
  }
  if (best.algorithm == nullptr)
    fail(ErrorCode::InvalidArgument, "no algorithm implements {}", to_string(call.collective));
  best.explanation = fmt::format("{} of {} x {} B on {} ranks: chose {} (predicted: {})", to_string(call.collective),
                                 call.count, element_size, call.size, best.algorithm->name, explanation);
  if (choices_.size() >= kMaxCached) choices_.clear();
  choices_.emplace(key, best);
  return best;
}

std::string describe(const LinkModel& link) {
  return fmt::format("alpha {:.1f} us, beta {:.2f} GB/s, gamma {:.2f} GB/s", link.alpha * 1e6, 1e-9 / link.beta,
                     1e-9 / link.gamma);
}

namespace {

using Seconds = std::chrono::duration<double>;

transport::Envelope probe_envelope(std::uint64_t comm_id, std::uint32_t step, std::uint64_t bytes) {
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

// Ranks 0 and 1 play ping-pong; returns {alpha, beta} on rank 0 (zeros on rank 1).
std::pair<double, double> probe_link(transport::Transport& t, std::uint64_t comm_id, Deadline deadline) {
  constexpr int kPings = 30;
  constexpr std::size_t kBulkBytes = 4 << 20;
  constexpr int kBulkRounds = 4;
  int peer = 1 - t.rank();
  std::vector<std::byte> small(8), bulk(kBulkBytes), ack(1);
  std::vector<double> round_trips, bulk_times;
  for (int i = 0; i < kPings; ++i) {
    auto begin = Clock::now();
    if (t.rank() == 0) {
      transport::send(t, peer, probe_envelope(comm_id, 0, 8), small, deadline);
      transport::recv(t, peer, probe_envelope(comm_id, 1, 8), small, deadline);
    } else {
      transport::recv(t, peer, probe_envelope(comm_id, 0, 8), small, deadline);
      transport::send(t, peer, probe_envelope(comm_id, 1, 8), small, deadline);
    }
    round_trips.push_back(Seconds(Clock::now() - begin).count());
  }
  for (int i = 0; i < kBulkRounds; ++i) {
    auto begin = Clock::now();
    if (t.rank() == 0) {
      transport::send(t, peer, probe_envelope(comm_id, 2, kBulkBytes), bulk, deadline);
      transport::recv(t, peer, probe_envelope(comm_id, 3, 1), ack, deadline);
    } else {
      transport::recv(t, peer, probe_envelope(comm_id, 2, kBulkBytes), bulk, deadline);
      transport::send(t, peer, probe_envelope(comm_id, 3, 1), ack, deadline);
    }
    bulk_times.push_back(Seconds(Clock::now() - begin).count());
  }
  // The first round trips warm up connections and caches: the median ignores them.
  double alpha = median(round_trips) / 2;
  double fastest_bulk = *std::min_element(bulk_times.begin() + 1, bulk_times.end());
  double beta = std::max(fastest_bulk - 2 * alpha, 1e-9) / kBulkBytes;
  return {alpha, beta};
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

}  // namespace

LinkModel calibrate_link_model(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                               Deadline deadline) {
  if (auto fixed = fixed_model_from_environment()) return *fixed;
  const std::string key = "cost_model";
  if (transport.size() < 2) return LinkModel{};
  if (transport.rank() <= 1) {
    auto [alpha, beta] = probe_link(transport, comm_id, deadline);
    if (transport.rank() == 0) {
      LinkModel link{alpha, beta, probe_reduce()};
      store.set(key, fmt::format("{:a},{:a},{:a}", link.alpha, link.beta, link.gamma));
      log::info("measured {}", describe(link));
      return link;
    }
  }
  auto timeout = std::chrono::duration_cast<Duration>(deadline.remaining());
  std::string text = store.get(key, timeout);
  LinkModel link;
  if (std::sscanf(text.c_str(), "%la,%la,%la", &link.alpha, &link.beta, &link.gamma) != 3)
    fail(ErrorCode::Protocol, "malformed cost model '{}' in the store", text);
  return link;
}

}  // namespace canopy::collectives
