#include "canopy/training_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>

#include "common/error.hpp"
#include "common/fnv1a.hpp"

namespace canopy {

namespace {

constexpr std::int64_t kNoCommit = std::numeric_limits<std::int64_t>::max();

std::span<std::uint8_t> bytes_of(const TensorView& view, std::size_t bytes) {
  return {static_cast<std::uint8_t*>(view.data), bytes};
}

}  // namespace

void TrainingState::add(std::string name, TensorView buffer) {
  if (buffer.device != Device::CPU)
    fail(ErrorCode::InvalidArgument, "TrainingState::add('{}'): only host buffers are kept in memory", name);
  if (buffer.data == nullptr && buffer.count > 0)
    fail(ErrorCode::InvalidArgument, "TrainingState::add('{}'): a buffer of {} elements at null", name,
         buffer.count);
  for (const Buffer& known : buffers_)
    if (known.name == name) fail(ErrorCode::InvalidArgument, "TrainingState::add: '{}' added twice", name);
  if (!commits_.empty())
    fail(ErrorCode::InvalidArgument, "TrainingState::add('{}'): after the first commit", name);
  const std::size_t bytes = buffer.count * size_of(buffer.dtype);
  buffers_.push_back({std::move(name), buffer, bytes});
}

void TrainingState::commit(std::uint64_t step) {
  if (!commits_.empty() && step <= commits_.back().step)
    fail(ErrorCode::InvalidArgument, "TrainingState::commit({}): step {} was committed already", step,
         commits_.back().step);
  // The older of two commits is overwritten in place: a step's commit allocates nothing once warm.
  Commit next = commits_.size() == 2 ? std::move(commits_.front()) : Commit{};
  if (commits_.size() == 2) commits_.erase(commits_.begin());
  next.step = step;
  next.copies.resize(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const auto source = bytes_of(buffers_[i].view, buffers_[i].bytes);
    next.copies[i].resize(source.size());
    std::memcpy(next.copies[i].data(), source.data(), source.size());
  }
  commits_.push_back(std::move(next));
}

std::optional<std::uint64_t> TrainingState::committed_step() const {
  if (commits_.empty()) return std::nullopt;
  return commits_.back().step;
}

const TrainingState::Commit* TrainingState::commit_of(std::uint64_t step) const {
  for (const Commit& commit : commits_)
    if (commit.step == step) return &commit;
  return nullptr;
}

// Every member must have registered the same buffers: a digest of names, counts and types, whose
// minimum and maximum over the group agree only where every member's is the same.
void TrainingState::check_registrations_match(Communicator& comm) const {
  std::string description;
  for (const Buffer& buffer : buffers_)
    description += fmt::format("{}:{}:{};", buffer.name, buffer.view.count, to_string(buffer.view.dtype));
  const auto digest = static_cast<std::int64_t>(fnv1a64(description) >> 1);
  std::array<std::int64_t, 2> range{digest, -digest};  // max of both: the largest and the smallest
  comm.all_reduce(std::span<std::int64_t>(range), ReduceOp::Max);
  if (range[0] != -range[1])
    fail(ErrorCode::Mismatch,
         "TrainingState::restore: the members registered different buffers (rank {} has {} of them: {})",
         comm.rank(), buffers_.size(), description);
}

std::optional<std::uint64_t> TrainingState::restore(Communicator& comm) {
  check_registrations_match(comm);
  // The latest step every member with commits holds: a newcomer, with none, does not hold it back.
  std::array<std::int64_t, 1> step{commits_.empty() ? kNoCommit
                                                    : static_cast<std::int64_t>(commits_.back().step)};
  comm.all_reduce(std::span<std::int64_t>(step), ReduceOp::Min);
  const Commit* mine = step[0] == kNoCommit ? nullptr : commit_of(static_cast<std::uint64_t>(step[0]));
  std::array<std::int32_t, 1> holder{mine != nullptr || step[0] == kNoCommit ? comm.rank() : comm.size()};
  comm.all_reduce(std::span<std::int32_t>(holder), ReduceOp::Min);
  if (holder[0] == comm.size())
    fail(ErrorCode::Mismatch,
         "TrainingState::restore: no member holds step {}, the latest every member committed (this rank's "
         "commits: {}): commit every step on every member",
         step[0], commits_.empty() ? "none" : fmt::format("up to step {}", commits_.back().step));
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const auto bytes = bytes_of(buffers_[i].view, buffers_[i].bytes);
    if (comm.rank() == holder[0] && mine != nullptr)
      std::memcpy(bytes.data(), mine->copies[i].data(), bytes.size());
    comm.broadcast(bytes, holder[0]);
  }
  commits_.clear();
  if (step[0] == kNoCommit) return std::nullopt;
  commit(static_cast<std::uint64_t>(step[0]));
  return static_cast<std::uint64_t>(step[0]);
}

}  // namespace canopy
