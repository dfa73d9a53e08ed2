// ChoiceMemo: the ranks of a host share one simulation of a choice through a file, and nothing a file can
// hold (garbage, another input's answer, a holder that never lets go, a directory that cannot be made)
// changes an answer or makes a reader wait past its patience.
#include "collectives/selection/choice_memo.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/selection/cost_model.hpp"

namespace canopy::collectives {
namespace {

namespace fs = std::filesystem;

class ChoiceMemoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("choice-memo-test-" + std::to_string(::getpid()));
    fs::remove_all(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }
  std::vector<fs::path> files() const {
    std::vector<fs::path> found;
    if (fs::exists(directory_))
      for (const auto& entry : fs::directory_iterator(directory_)) found.push_back(entry.path());
    return found;
  }
  fs::path directory_;
};

// 128 ranks on one host of 2 cores: a choice that takes milliseconds to simulate.
CollectiveCall crowded_all_reduce(std::uint64_t count) {
  auto hosts = std::make_shared<HostLayout>();
  hosts->host_of_rank.assign(128, 0);
  hosts->cores_of_host = {2};
  return {.collective = Collective::AllReduce, .size = 128, .count = count, .hosts = hosts};
}

const LinkModel kLink(20e-6, 1.0 / 2e9, 1.0 / 10e9);

TEST_F(ChoiceMemoTest, ProcessesOfAHostSimulateOnceAndAllChooseAlike) {
  constexpr int kProcesses = 6;
  const AlgorithmChoice expected = CostModel(kLink).evaluate(crowded_all_reduce(1), 4, Pace::OneCall);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto memo = std::make_shared<ChoiceMemo>(directory_);
      CostModel model(kLink, memo);
      const AlgorithmChoice& choice = model.choose(crowded_all_reduce(1), 4);
      const bool same = choice.algorithm == expected.algorithm &&
                        choice.predicted_seconds == expected.predicted_seconds &&
                        choice.explanation == expected.explanation;
      const char report[2] = {same ? 'y' : 'n', memo->computed() == 1 ? 'c' : 'r'};
      _exit(::write(pipe_fds[1], report, 2) == 2 ? 0 : 1);
    }
    children.push_back(pid);
  }
  ::close(pipe_fds[1]);
  int computed = 0, same = 0;
  char report[2];
  while (::read(pipe_fds[0], report, 2) == 2) {
    same += report[0] == 'y';
    computed += report[1] == 'c';
  }
  ::close(pipe_fds[0]);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(same, kProcesses) << "a process chose otherwise than the simulation";
  EXPECT_EQ(computed, 1) << "every process but one should have read the answer";
  EXPECT_EQ(files().size(), 1u);
}

TEST_F(ChoiceMemoTest, AnotherCallIsAnotherAnswer) {
  auto memo = std::make_shared<ChoiceMemo>(directory_);
  CostModel model(kLink, memo);
  const Algorithm* small = model.choose(crowded_all_reduce(1), 4).algorithm;
  const Algorithm* large = model.choose(crowded_all_reduce(1 << 22), 4).algorithm;
  EXPECT_EQ(small, CostModel(kLink).evaluate(crowded_all_reduce(1), 4, Pace::OneCall).algorithm);
  EXPECT_EQ(large, CostModel(kLink).evaluate(crowded_all_reduce(1 << 22), 4, Pace::OneCall).algorithm);
  EXPECT_EQ(memo->computed(), 2);
  EXPECT_EQ(files().size(), 2u);
}

TEST_F(ChoiceMemoTest, GarbageInTheFileIsReplacedNotBelieved) {
  ChoiceMemo memo(directory_);
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("answer"); }), "answer");
  ASSERT_EQ(files().size(), 1u);
  std::ofstream(files()[0], std::ios::trunc) << "not a memo at all";
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("answer"); }), "answer");
  EXPECT_EQ(memo.computed(), 2);
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("never asked"); }), "answer");
  EXPECT_EQ(memo.recalled(), 1);
}

TEST_F(ChoiceMemoTest, AFileThatServesOtherInputsIsLeftAlone) {
  ChoiceMemo memo(directory_);
  memo.recall("inputs", [] { return std::string("answer"); });
  ASSERT_EQ(files().size(), 1u);
  const fs::path file = files()[0];
  // The same name with other inputs inside: what a digest's collision would leave.
  std::ofstream(file, std::ios::trunc) << "canopy choice memo 1\n6\nothersTHEIRS";
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("mine"); }), "mine");
  std::ifstream in(file);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "canopy choice memo 1\n6\nothersTHEIRS");
}

TEST_F(ChoiceMemoTest, AHolderThatNeverLetsGoCostsOnlyThePatience) {
  ChoiceMemo memo(directory_, std::chrono::milliseconds(100));
  memo.recall("inputs", [] { return std::string("answer"); });
  ASSERT_EQ(files().size(), 1u);
  // A second open file description of it, locked: what a process stopped mid-write holds.
  const int holder = ::open(files()[0].c_str(), O_RDWR);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("computed here"); }), "computed here");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(100));
  EXPECT_LT(waited, std::chrono::seconds(2));
  ::close(holder);
}

// Once the answer is written, readers read it side by side: one reading (a shared lock held) keeps no other
// waiting, where hundreds of a host's ranks taking turns under the exclusive lock took a sixth of their CPU.
TEST_F(ChoiceMemoTest, ReadersOfAWrittenAnswerDoNotWaitForEachOther) {
  ChoiceMemo first(directory_);
  first.recall("inputs", [] { return std::string("answer"); });
  ASSERT_EQ(files().size(), 1u);
  const int reader = ::open(files()[0].c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  ASSERT_EQ(::flock(reader, LOCK_SH), 0);
  ChoiceMemo second(directory_, std::chrono::milliseconds(100));  // a lock not had by then: computed here
  EXPECT_EQ(second.recall("inputs", [] { return std::string("computed here"); }), "answer");
  EXPECT_EQ(second.recalled(), 1);
  ::close(reader);
}

TEST_F(ChoiceMemoTest, ADirectoryThatCannotBeMadeMeansComputingHere) {
  ChoiceMemo memo("/proc/self/no-such-directory");
  EXPECT_EQ(memo.recall("inputs", [] { return std::string("answer"); }), "answer");
  EXPECT_EQ(memo.computed(), 1);
}

TEST(ChoiceMemoForGroup, OnlyWhereManyRanksShareAHost) {
  EXPECT_EQ(ChoiceMemo::for_group(512, 1), nullptr);
  EXPECT_EQ(ChoiceMemo::for_group(8, 8), nullptr);
  EXPECT_NE(ChoiceMemo::for_group(512, 512), nullptr);
}

}  // namespace
}  // namespace canopy::collectives
