// The ranks of one host make the same choices of algorithm from the same model (CostModel), and at
// hundreds of ranks sharing a few cores simulating every candidate is most of a first call. A ChoiceMemo
// lets the first of them to need an answer compute it and leave it in a file; the others read it.
//
// It is a memo of a pure function: a file is named by a digest of the inputs and starts with the inputs
// in full, and a reader takes its answer only for exactly its own inputs. A file left by another job, or
// another communicator, is then the same answer or is ignored; a stale or corrupt one cannot mislead.
// Whatever goes wrong with the files (a full /dev/shm, a directory that cannot be made, a writer that
// stopped while it held the lock) costs only the simulation it meant to spare.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace canopy::collectives {

class ChoiceMemo {
 public:
  // How long a reader waits, by default, for another process computing the same answer before it
  // computes its own.
  static constexpr std::chrono::milliseconds kPatience{5000};
  // Past this many files, a writer removes those not written for kRetention.
  static constexpr std::size_t kMaxFiles = 512;
  static constexpr std::chrono::minutes kRetention{60};

  explicit ChoiceMemo(std::filesystem::path directory, std::chrono::milliseconds patience = kPatience);

  // The memo of a group of `size` ranks, `local_size` of them on this host, in /dev/shm; null where a
  // file would cost more than the simulation it spares (few ranks, or one on this host).
  static std::shared_ptr<ChoiceMemo> for_group(int size, int local_size);
  static constexpr int kFromRanks = 64;

  // The answer for `inputs`: read from its file, or computed by `compute` and written there for the others.
  std::string recall(std::string_view inputs, const std::function<std::string()>& compute);

  // Answers this process read from a file and answers it computed: what a test looks at.
  int recalled() const { return recalled_; }
  int computed() const { return computed_; }

 private:
  std::string compute_and_offer(int fd, std::string_view inputs, const std::function<std::string()>& compute);
  void forget_old_files();

  std::filesystem::path directory_;
  std::chrono::milliseconds patience_;
  int recalled_ = 0;
  int computed_ = 0;
};

}  // namespace canopy::collectives
