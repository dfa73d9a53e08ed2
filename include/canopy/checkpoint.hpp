// Checkpoints of a data-parallel job: global rank 0 alone writes (replicas are identical, so one copy is
// enough), atomically: a temporary name, fsync, rename, fsync of the directory. A reader never sees a
// partial checkpoint, and a failed save (full disk, unwritable directory) leaves the previous ones intact.
//
// Other ranks wait for rank 0's verdict on a store key, not in a collective: a slow save cannot make
// their next collective time out. After a restart, any process may be rank 0 (ranks are not stable), so
// the directory must be one that every host sees (a shared filesystem) or the job must run on one host.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "canopy/store.hpp"

namespace canopy {

struct CheckpointOptions {
  std::string directory;
  int keep_last = 3;    // complete checkpoints kept; older ones are removed after a successful save
  Duration timeout{0};  // how long ranks other than 0 wait for a save; 0 = CANOPY_TIMEOUT (300 s)
};

struct Checkpoint {
  std::uint64_t step = 0;
  std::string data;
  std::string path;
};

class Checkpointer {
 public:
  // `store` is shared by the job's ranks (TrainingJob::store); `rank` is the global rank.
  Checkpointer(std::shared_ptr<Store> store, int rank, CheckpointOptions options);

  // Every rank calls it, in the same order, with the same step; `data` is read on rank 0 only. Returns once
  // the checkpoint is complete on disk; throws on every rank (Error(System) naming the file and the OS error
  // on rank 0, Error(PeerFailed) quoting it elsewhere) when rank 0 could not write it.
  void save(std::uint64_t step, std::string_view data);

  // The newest complete checkpoint in the directory (a torn or corrupt file is skipped with a warning).
  std::optional<Checkpoint> load_latest() const;

  const CheckpointOptions& options() const { return options_; }

 private:
  std::shared_ptr<Store> store_;
  int rank_;
  CheckpointOptions options_;
  std::uint64_t saves_ = 0;  // numbers the verdict keys: saving one step twice must not find the old verdict
};

// The file operations underneath, for tools and tests: write one checkpoint atomically and keep the
// newest `keep_last`; find the newest complete one. Both throw Error(System) with the path and errno.
std::string write_checkpoint_file(const std::string& directory, std::uint64_t step, std::string_view data,
                                  int keep_last);
std::optional<Checkpoint> find_latest_checkpoint(const std::string& directory);

}  // namespace canopy
