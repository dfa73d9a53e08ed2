// Checkpointer::save: rank 0 writes, then publishes its verdict under a store key the others wait on.
#include <fmt/format.h>

#include "canopy/checkpoint.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy {
namespace {

std::string verdict_key(std::uint64_t save, std::uint64_t step) {
  return fmt::format("gradsync/checkpoint/{}/step-{}", save, step);
}

}  // namespace

Checkpointer::Checkpointer(std::shared_ptr<Store> store, int rank, CheckpointOptions options)
    : store_(std::move(store)), rank_(rank), options_(std::move(options)) {
  if (!store_) fail(ErrorCode::InvalidArgument, "Checkpointer: a store is required (TrainingJob::store)");
  if (options_.directory.empty())
    fail(ErrorCode::InvalidArgument, "Checkpointer: CheckpointOptions::directory is empty");
  if (options_.keep_last < 1)
    fail(ErrorCode::InvalidArgument, "Checkpointer: keep_last must be at least 1, got {}",
         options_.keep_last);
  if (options_.timeout.count() <= 0) options_.timeout = default_timeout();
}

void Checkpointer::save(std::uint64_t step, std::string_view data) {
  const std::string key = verdict_key(saves_++, step);
  if (rank_ == 0) {
    std::string path;
    try {
      path = write_checkpoint_file(options_.directory, step, data, options_.keep_last);
    } catch (const std::exception& e) {
      store_->set(key, std::string("error ") + e.what());
      throw;
    }
    store_->set(key, "ok " + path);
    log::info("checkpoint step {} written to {}", step, path);
    return;
  }
  std::string verdict = store_->get(key, options_.timeout);
  if (verdict.rfind("ok ", 0) != 0)
    fail(ErrorCode::PeerFailed, "checkpoint step {}: rank 0 could not save it: {}", step,
         verdict.rfind("error ", 0) == 0 ? verdict.substr(6) : verdict);
}

std::optional<Checkpoint> Checkpointer::load_latest() const {
  return find_latest_checkpoint(options_.directory);
}

}  // namespace canopy
