// The reducer: buckets launch as soon as their last gradient is ready (in bucket order, the same on every
// rank, since collectives must be issued in one order everywhere), finish() waits and averages on the copy
// back. CPU buckets are flat host buffers allocated once; CUDA buckets go through DeviceStaging.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "canopy/gradsync.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "gradsync/bucket_copy.hpp"
#include "gradsync/bucket_plan.hpp"
#include "gradsync/device_staging.hpp"
#include "gradsync/registration_check.hpp"

namespace canopy {

using gradsync::Bucket;

class GradientSynchronizer::Impl {
 public:
  Impl(Communicator& comm, GradSyncOptions options) : comm_(comm), options_(std::move(options)) {
    if (options_.bucket_bytes == 0 || options_.first_bucket_bytes == 0)
      fail(ErrorCode::InvalidArgument,
           "GradientSynchronizer: bucket sizes must be positive (got {} and first {})", options_.bucket_bytes,
           options_.first_bucket_bytes);
  }

  ~Impl() {
    try {
      wait_launched();
    } catch (const std::exception& e) {
      log::warn("GradientSynchronizer: an all-reduce still running at destruction failed: {}", e.what());
    }
  }

  std::size_t add(std::string name, TensorView gradient, TensorView parameter) {
    if (frozen_)
      fail(ErrorCode::InvalidArgument,
           "GradientSynchronizer::add('{}'): registration is closed (buckets were formed by an earlier "
           "broadcast_parameters, mark_ready or buckets call); register every gradient first",
           name);
    if (gradient.data == nullptr && gradient.count > 0)
      fail(ErrorCode::InvalidArgument, "GradientSynchronizer::add('{}'): null gradient of {} elements", name,
           gradient.count);
    if (!gradsync::is_floating_point(gradient.dtype))
      fail(ErrorCode::InvalidArgument,
           "GradientSynchronizer::add('{}'): gradients must be floating point, got {}", name,
           to_string(gradient.dtype));
    if (parameter.data != nullptr &&
        (parameter.count != gradient.count || parameter.device != gradient.device))
      fail(ErrorCode::InvalidArgument,
           "GradientSynchronizer::add('{}'): the parameter ({} elements) must match its gradient ({} "
           "elements) "
           "in size and device",
           name, parameter.count, gradient.count);
    if (!gradients_.empty() && gradient.device != gradients_.front().device)
      fail(ErrorCode::InvalidArgument,
           "GradientSynchronizer::add('{}'): all gradients must live on one device (CPU or CUDA); '{}' did "
           "not",
           name, names_.front());
    names_.push_back(std::move(name));
    gradients_.push_back(gradient);
    parameters_.push_back(parameter);
    return gradients_.size() - 1;
  }

  void broadcast_parameters() {
    freeze();
    check_same_registration();
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (parameters_[i].data == nullptr)
        fail(ErrorCode::InvalidArgument,
             "broadcast_parameters: gradient {} ('{}') was registered without its parameter", i, names_[i]);
    }
    for (const TensorView& parameter : parameters_) {
      if (parameter.device == Device::CUDA) {
        staging_->broadcast(parameter, 0);
      } else {
        comm_.run({Collective::Broadcast, parameter.data, parameter.data, parameter.count, parameter.dtype,
                   ReduceOp::Sum, 0},
                  options_.collective);
      }
    }
  }

  void set_sync(bool enabled) {
    if (any_marked_ && enabled != sync_)
      fail(
          ErrorCode::InvalidArgument,
          "GradientSynchronizer::set_sync: called in the middle of a step (after mark_ready, before finish)");
    sync_ = enabled;
  }
  bool sync_enabled() const { return sync_; }

  void mark_ready(std::size_t index, void* cuda_stream) {
    freeze();
    if (index >= gradients_.size())
      fail(ErrorCode::InvalidArgument, "mark_ready({}): only {} gradients are registered", index,
           gradients_.size());
    if (ready_[index])
      fail(ErrorCode::InvalidArgument,
           "mark_ready({}): gradient '{}' was already marked ready in this step (a hook fired twice, or "
           "finish() "
           "was not called after the previous backward)",
           index, names_[index]);
    ready_[index] = true;
    any_marked_ = true;
    if (!sync_) return;  // accumulation micro-step: the gradient stays where it is
    arrival_.push_back(index);
    if (staging_) staging_->gradient_ready(index, cuda_stream);
    std::size_t bucket = bucket_of_[index];
    if (--pending_[bucket] > 0) return;
    // Launch in bucket order: a bucket completed early waits for the ones before it.
    while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch(next_launch_++);
  }

  void finish() {
    freeze();
    if (!sync_) {
      ++stats_.skipped_steps;
      reset_step();
      return;
    }
    std::vector<std::size_t> missing;
    for (std::size_t i = 0; i < ready_.size(); ++i)
      if (!ready_[i]) missing.push_back(i);
    if (!missing.empty()) {
      wait_launched();
      reset_step();
      std::string list;
      for (std::size_t i = 0; i < missing.size() && i < 8; ++i)
        list += fmt::format("{}{} ('{}')", i ? ", " : "", missing[i], names_[missing[i]]);
      if (missing.size() > 8) list += fmt::format(" and {} more", missing.size() - 8);
      fail(ErrorCode::InvalidArgument,
           "finish(): rank {}: {} of {} gradients were never marked ready in this step: {}. Every registered "
           "gradient needs mark_ready once per synchronised step (an unused parameter too: mark its zero "
           "gradient)",
           comm_.rank(), missing.size(), gradients_.size(), list);
    }
    try {
      complete_buckets();
    } catch (...) {
      reset_step();
      throw;
    }
    ++stats_.synced_steps;
    if (options_.rebuild_buckets && !rebuilt_) rebuild_from_arrival();
    reset_step();
  }

  std::vector<std::vector<std::size_t>> bucket_indices() {
    freeze();
    std::vector<std::vector<std::size_t>> result;
    for (const Bucket& bucket : buckets_) result.push_back(bucket.gradients);
    return result;
  }

  GradSyncStats stats() const { return stats_; }
  int world_size() const { return comm_.size(); }

 private:
  void freeze() {
    if (frozen_) return;
    frozen_ = true;
    ready_.assign(gradients_.size(), false);
    form_buckets(gradsync::reverse_registration_order(gradients_.size()));
  }

  void form_buckets(const std::vector<std::size_t>& order) {
    std::vector<gradsync::GradientSlot> slots;
    for (const TensorView& g : gradients_) slots.push_back({g.count * size_of(g.dtype), g.dtype, g.device});
    buckets_ = gradsync::plan_buckets(slots, order, options_.first_bucket_bytes, options_.bucket_bytes,
                                      options_.in_place_bytes);
    bucket_of_.assign(gradients_.size(), 0);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (std::size_t g : buckets_[b].gradients) bucket_of_[g] = b;
    works_.assign(buckets_.size(), Work());
    launched_.assign(buckets_.size(), false);
    bool on_device = !gradients_.empty() && gradients_.front().device == Device::CUDA;
    if (on_device) {
      staging_.reset();  // its pinned memory is sized for the old plan
      staging_ = gradsync::make_cuda_staging(comm_, gradients_, buckets_, options_);
      host_buffers_.clear();
    } else {
      host_buffers_.resize(buckets_.size());
      for (std::size_t b = 0; b < buckets_.size(); ++b)
        host_buffers_[b].resize(buckets_[b].in_place ? 0 : buckets_[b].bytes);
    }
    reset_pending();
    log::info("GradientSynchronizer: {} gradients in {} buckets (first {} B, then {} B caps)",
              gradients_.size(), buckets_.size(), options_.first_bucket_bytes, options_.bucket_bytes);
  }

  void reset_pending() {
    pending_.assign(buckets_.size(), 0);
    for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].gradients.size();
    next_launch_ = 0;
  }

  void reset_step() {
    std::fill(ready_.begin(), ready_.end(), false);
    std::fill(launched_.begin(), launched_.end(), false);
    arrival_.clear();
    any_marked_ = false;
    reset_pending();
  }

  void launch(std::size_t b) {
    const Bucket& bucket = buckets_[b];
    launched_[b] = true;
    ++stats_.bucket_all_reduces;
    stats_.bytes_all_reduced += bucket.bytes;
    if (staging_) return staging_->launch(b);
    if (bucket.in_place) {  // no copies: the all-reduce averages the gradient where it lies
      const TensorView& g = gradients_[bucket.gradients.front()];
      works_[b] = comm_.start({Collective::AllReduce, g.data, g.data, g.count, g.dtype, ReduceOp::Avg, 0},
                              options_.collective);
      return;
    }
    std::byte* flat = host_buffers_[b].data();
    for (std::size_t k = 0; k < bucket.gradients.size(); ++k) {
      const TensorView& g = gradients_[bucket.gradients[k]];
      if (g.count > 0) std::memcpy(flat + bucket.offsets[k], g.data, g.count * size_of(g.dtype));
    }
    std::size_t count = bucket.bytes / size_of(bucket.dtype);
    works_[b] = comm_.start({Collective::AllReduce, flat, flat, count, bucket.dtype, ReduceOp::Sum, 0},
                            options_.collective);
  }

  // Waits for every bucket in launch order and copies the sums of the packed ones back, divided by the world
  // size on the way (here rather than on the progress thread, where the copy would hold up the next bucket's
  // all-reduce; docs/GRADSYNC.md, *One step*).
  void complete_buckets() {
    if (staging_) {
      stats_.buckets_done_before_finish += staging_->completed();
      Duration timeout =
          options_.collective.timeout.count() > 0 ? options_.collective.timeout : default_timeout();
      timed_wait([&] {
        staging_->wait_all(
            Deadline::after(timeout * static_cast<long>(std::max<std::size_t>(1, buckets_.size()))));
      });
      return;
    }
    for (const Work& work : works_) stats_.buckets_done_before_finish += work.completed() ? 1 : 0;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      timed_wait([&] { works_[b].wait(); });
      const Bucket& bucket = buckets_[b];
      if (bucket.in_place) continue;
      const std::byte* flat = host_buffers_[b].data();
      for (std::size_t k = 0; k < bucket.gradients.size(); ++k) {
        const TensorView& g = gradients_[bucket.gradients[k]];
        gradsync::copy_averaged(g.dtype, g.data, flat + bucket.offsets[k], g.count, comm_.size());
      }
    }
  }

  // Runs `wait` and counts its time as finish() waiting for communication (GradSyncStats).
  template <class Wait>
  void timed_wait(Wait&& wait) {
    const auto begin = std::chrono::steady_clock::now();
    wait();
    stats_.finish_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }

  void wait_launched() {
    if (staging_) {
      if (next_launch_ > 0) staging_->wait_all(Deadline::after(default_timeout()));
      return;
    }
    std::exception_ptr first;
    for (std::size_t b = 0; b < works_.size(); ++b) {
      if (!launched_[b]) continue;
      try {
        works_[b].wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // DDP's rebuild: rank 0's arrival order becomes everyone's bucket order from the next step on.
  void rebuild_from_arrival() {
    rebuilt_ = true;
    std::vector<std::int64_t> order(arrival_.begin(), arrival_.end());
    comm_.broadcast(std::span(order), 0);
    std::vector<std::size_t> plan_order(order.begin(), order.end());
    form_buckets(plan_order);
    log::info("GradientSynchronizer: buckets rebuilt from rank 0's gradient arrival order");
  }

  // Rank 0's registration is broadcast; each rank compares and all ranks learn every rank's first difference,
  // so that all of them fail together with the same message instead of some hanging in the broadcasts.
  void check_same_registration() {
    std::vector<gradsync::EntryDescription> mine;
    for (std::size_t i = 0; i < gradients_.size(); ++i)
      mine.push_back(gradsync::describe_entry(names_[i], gradients_[i], parameters_[i]));
    std::int64_t root_count = static_cast<std::int64_t>(mine.size());
    comm_.broadcast(std::span(&root_count, 1), 0);
    std::vector<std::int64_t> flat(static_cast<std::size_t>(root_count) * gradsync::kEntryFields);
    if (comm_.rank() == 0)
      for (std::size_t i = 0; i < mine.size(); ++i)
        std::copy(mine[i].begin(), mine[i].end(),
                  flat.begin() + static_cast<long>(i * gradsync::kEntryFields));
    comm_.broadcast(std::span(flat), 0);
    std::vector<gradsync::EntryDescription> root(static_cast<std::size_t>(root_count));
    for (std::size_t i = 0; i < root.size(); ++i)
      std::copy_n(flat.begin() + static_cast<long>(i * gradsync::kEntryFields), gradsync::kEntryFields,
                  root[i].begin());

    // Per rank: [first difference or -1, this rank's registered count, its entry at the difference].
    constexpr std::size_t kReport = 2 + gradsync::kEntryFields;
    std::vector<std::int64_t> report(kReport, -1);
    auto diff = gradsync::first_difference(root, mine);
    report[1] = static_cast<std::int64_t>(mine.size());
    if (diff) {
      report[0] = static_cast<std::int64_t>(*diff);
      if (*diff < mine.size()) std::copy(mine[*diff].begin(), mine[*diff].end(), report.begin() + 2);
    }
    std::vector<std::int64_t> reports(kReport * static_cast<std::size_t>(comm_.size()));
    comm_.all_gather(std::span<const std::int64_t>(report), std::span(reports));
    for (int r = 0; r < comm_.size(); ++r) {
      const std::int64_t* theirs = reports.data() + static_cast<std::size_t>(r) * kReport;
      if (theirs[0] < 0) continue;
      auto index = static_cast<std::size_t>(theirs[0]);
      auto side = [&](int who, const gradsync::EntryDescription* entry, std::int64_t count) {
        if (!entry) return fmt::format("rank {} registered only {} gradients", who, count);
        return fmt::format("rank {} has {}", who, gradsync::entry_text(*entry));
      };
      gradsync::EntryDescription their_entry;
      std::copy_n(theirs + 2, gradsync::kEntryFields, their_entry.begin());
      bool they_have = index < static_cast<std::size_t>(theirs[1]);
      std::string local_name = index < names_.size()
                                   ? fmt::format(" ('{}' on rank {})", names_[index], comm_.rank())
                                   : std::string();
      fail(ErrorCode::Mismatch,
           "broadcast_parameters: rank {} registered a different model than rank 0; first difference at "
           "gradient {}{}: {}, {}",
           r, index, local_name, side(0, index < root.size() ? &root[index] : nullptr, root_count),
           side(r, they_have ? &their_entry : nullptr, theirs[1]));
    }
  }

  Communicator& comm_;
  GradSyncOptions options_;
  std::vector<std::string> names_;
  std::vector<TensorView> gradients_;
  std::vector<TensorView> parameters_;
  bool frozen_ = false;
  bool sync_ = true;
  bool rebuilt_ = false;
  bool any_marked_ = false;

  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<std::vector<std::byte>> host_buffers_;
  std::unique_ptr<gradsync::DeviceStaging> staging_;
  std::vector<Work> works_;
  std::vector<bool> launched_;
  std::vector<bool> ready_;
  std::vector<std::size_t> pending_;
  std::size_t next_launch_ = 0;
  std::vector<std::size_t> arrival_;
  GradSyncStats stats_;
};

GradientSynchronizer::GradientSynchronizer(Communicator& comm, GradSyncOptions options)
    : impl_(std::make_unique<Impl>(comm, std::move(options))) {}
GradientSynchronizer::~GradientSynchronizer() = default;

std::size_t GradientSynchronizer::add(std::string name, TensorView gradient, TensorView parameter) {
  return impl_->add(std::move(name), gradient, parameter);
}
void GradientSynchronizer::broadcast_parameters() {
  impl_->broadcast_parameters();
}
void GradientSynchronizer::set_sync(bool enabled) {
  impl_->set_sync(enabled);
}
bool GradientSynchronizer::sync_enabled() const {
  return impl_->sync_enabled();
}
void GradientSynchronizer::mark_ready(std::size_t index, void* cuda_stream) {
  impl_->mark_ready(index, cuda_stream);
}
void GradientSynchronizer::finish() {
  impl_->finish();
}
std::vector<std::vector<std::size_t>> GradientSynchronizer::buckets() {
  return impl_->bucket_indices();
}
GradSyncStats GradientSynchronizer::stats() const {
  return impl_->stats();
}
int GradientSynchronizer::world_size() const {
  return impl_->world_size();
}

}  // namespace canopy
