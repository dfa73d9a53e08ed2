// Checkpoints on real files: round trip, the newest kept K, torn and temporary files never loaded, a
// full disk (RLIMIT_FSIZE) and an unwritable target reported with the previous checkpoint intact, and
// the other ranks waiting on rank 0's verdict through the store.
#include "canopy/checkpoint.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "canopy/error.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

namespace fs = std::filesystem;
using testing::require;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Checkpoint, RoundTripAndKeepsTheNewestK) {
  testing::TempDir dir;
  for (std::uint64_t step = 1; step <= 5; ++step)
    write_checkpoint_file(dir.path(), step * 10, std::string(1000 + step, static_cast<char>('a' + step)), 2);
  EXPECT_EQ(names_in(dir.path()),
            (std::vector<std::string>{"checkpoint-000000000040.ckpt", "checkpoint-000000000050.ckpt"}));
  auto latest = find_latest_checkpoint(dir.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 50u);
  EXPECT_EQ(latest->data, std::string(1005, 'f'));
  EXPECT_FALSE(find_latest_checkpoint(dir.path() + "/absent").has_value());
}

TEST(Checkpoint, TornCorruptAndTemporaryFilesAreNeverLoaded) {
  testing::TempDir dir;
  write_checkpoint_file(dir.path(), 7, "complete seven", 5);
  std::string good = dir.path() + "/checkpoint-000000000007.ckpt";
  // A newer file cut short (as a copy that crashed half-way would leave it), one with a flipped byte, and a
  // temporary of a save that never finished.
  fs::copy_file(good, dir.path() + "/checkpoint-000000000008.ckpt");
  fs::resize_file(dir.path() + "/checkpoint-000000000008.ckpt", fs::file_size(good) - 3);
  fs::copy_file(good, dir.path() + "/checkpoint-000000000009.ckpt");
  {
    std::fstream f(dir.path() + "/checkpoint-000000000009.ckpt",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('X');
  }
  std::ofstream(dir.path() + "/.checkpoint-000000000010.ckpt.tmp-1") << "partial";
  auto latest = find_latest_checkpoint(dir.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 7u);
  EXPECT_EQ(latest->data, "complete seven");
}

TEST(Checkpoint, UnwritableTargetIsAClearErrorAndKeepsThePrevious) {
  testing::TempDir dir;
  write_checkpoint_file(dir.path(), 1, "one", 3);
  // The temporary's name is taken by a directory: creating it fails, as in a directory we may not write.
  fs::create_directory(dir.path() + "/.checkpoint-000000000002.ckpt.tmp-" + std::to_string(getpid()));
  try {
    write_checkpoint_file(dir.path(), 2, "two", 3);
    FAIL() << "the save succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::System);
    EXPECT_NE(std::string(e.what()).find("checkpoint step 2: cannot create"), std::string::npos) << e.what();
  }
  EXPECT_EQ(find_latest_checkpoint(dir.path())->data, "one");
  // A directory below a regular file cannot exist at all.
  std::ofstream(dir.path() + "/plain") << "x";
  EXPECT_THROW(write_checkpoint_file(dir.path() + "/plain/ckpt", 3, "three", 3), Error);
}

TEST(Checkpoint, FullDiskIsAClearErrorAndKeepsThePrevious) {
  testing::TempDir dir;
  write_checkpoint_file(dir.path(), 1, std::string(100, 'p'), 3);
  auto exits = testing::run_processes(1, [&](int) {
    // Files may not grow past 4 KiB in this process: writes fail with EFBIG, as on a full disk.
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_checkpoint_file(dir.path(), 2, std::string(64 * 1024, 'n'), 3);
    } catch (const Error& e) {
      std::string what = e.what();
      require(what.find("checkpoint step 2: cannot write") != std::string::npos &&
                  what.find("File too large") != std::string::npos,
              "unclear message: {}", what);
      return;
    }
    throw std::runtime_error("a 64 KiB checkpoint was written under a 4 KiB file size limit");
  });
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_EQ(names_in(dir.path()),
            std::vector<std::string>{"checkpoint-000000000001.ckpt"});  // no temporary left
  EXPECT_EQ(find_latest_checkpoint(dir.path())->data, std::string(100, 'p'));
}

TEST(Checkpoint, OtherRanksWaitForRankZeroThroughTheStore) {
  testing::TempDir store_dir, ckpt_dir;
  auto exits = testing::run_processes(3, [&](int rank) {
    Checkpointer checkpointer(open_file_store(store_dir.path()), rank,
                              {ckpt_dir.path(), 2, std::chrono::seconds(20)});
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow save
    checkpointer.save(4, rank == 0 ? "weights at 4" : "");
    // Whoever returns from save finds the checkpoint complete.
    auto latest = checkpointer.load_latest();
    require(latest && latest->step == 4 && latest->data == "weights at 4",
            "rank {} found no complete checkpoint", rank);
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(exits[r].ok()) << "rank " << r << " " << exits[r].describe();
}

TEST(Checkpoint, SavingAStepAgainWaitsForTheNewWrite) {
  testing::TempDir store_dir, ckpt_dir;
  auto exits = testing::run_processes(2, [&](int rank) {
    Checkpointer checkpointer(open_file_store(store_dir.path()), rank,
                              {ckpt_dir.path(), 2, std::chrono::seconds(20)});
    checkpointer.save(9, rank == 0 ? "first" : "");
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    checkpointer.save(9, rank == 0 ? "second" : "");
    auto latest = checkpointer.load_latest();
    require(latest && latest->data == "second", "rank {} returned before the second save of step 9", rank);
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(exits[r].ok()) << "rank " << r << " " << exits[r].describe();
}

TEST(Checkpoint, RankZerosFailureReachesEveryRank) {
  testing::TempDir store_dir, base;
  std::ofstream(base.path() + "/plain") << "x";
  std::string bad = base.path() + "/plain/ckpt";
  auto exits = testing::run_processes(2, [&](int rank) {
    Checkpointer checkpointer(open_file_store(store_dir.path()), rank, {bad, 2, std::chrono::seconds(20)});
    try {
      checkpointer.save(1, "x");
    } catch (const Error& e) {
      std::string what = e.what();
      require(what.find(bad) != std::string::npos, "rank {}: the message does not name the directory: {}",
              rank, what);
      require(rank == 0 ? e.code() == ErrorCode::System : e.code() == ErrorCode::PeerFailed,
              "rank {}: code {}", rank, to_string(e.code()));
      return;
    }
    throw std::runtime_error("save succeeded");
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(exits[r].ok()) << "rank " << r << " " << exits[r].describe();
}

}  // namespace
}  // namespace canopy
