// The agreement protocol alone (collectives/elastic/fault_agreement.hpp), ranks as threads over an in-memory
// store: the AND and the members are the same on every rank, a rank that never comes is left out once
// its heartbeat is still (or at the deadline), and a rank that comes after the decision is told it was
// left out. Real processes and deaths are elastic_test's.
#include "collectives/elastic/fault_agreement.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/memory_store.hpp"

namespace canopy::collectives {
namespace {

using namespace std::chrono_literals;
using testing::MemoryStore;

LivenessSettings quick() {
  LivenessSettings settings;
  settings.interval = 10ms;
  settings.timeout = 150ms;
  return settings;
}

std::vector<int> ranks_of(int size) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  return ranks;
}

// Runs the agreement on the listed ranks of `size`, each on a thread, and returns each one's answer.
std::vector<Agreement> agree_on_threads(const std::shared_ptr<MemoryStore>& store, int size,
                                        const std::vector<int>& present, bool beating,
                                        Duration deadline = 20s, LivenessSettings settings = quick()) {
  std::vector<Agreement> answers(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int rank : present)
    threads.emplace_back([&, rank] {
      PeerSilence silence(store, ranks_of(size), settings, beating);
      AgreementRound round;
      round.rank = rank;
      round.size = size;
      round.what = "test agreement";
      round.deadline = Deadline::after(deadline);
      round.poll = 10ms;
      answers[static_cast<std::size_t>(rank)] = agree_in_store(*store, round, ~(1u << rank), silence);
    });
  for (auto& thread : threads) thread.join();
  return answers;
}

TEST(FaultAgreement, EveryRankGetsTheAndOfAllFlags) {
  auto store = std::make_shared<MemoryStore>();
  const auto answers = agree_on_threads(store, 6, ranks_of(6), true);
  for (const Agreement& answer : answers) {
    EXPECT_EQ(answer.value, ~0x3fu);
    EXPECT_EQ(answer.participants, ranks_of(6));
    EXPECT_TRUE(answer.left_out.empty());
  }
}

TEST(FaultAgreement, ARankWhoseHeartbeatIsStillIsLeftOutOnEveryRank) {
  auto store = std::make_shared<MemoryStore>();
  store->set("liveness/beats/2", "7");  // rank 2 beat, then stopped
  const auto answers = agree_on_threads(store, 4, {0, 1, 3}, true);
  for (int rank : {0, 1, 3}) {
    const Agreement& answer = answers[static_cast<std::size_t>(rank)];
    EXPECT_EQ(answer.value, ~0xbu) << "rank " << rank;
    EXPECT_EQ(answer.participants, (std::vector<int>{0, 1, 3}));
    ASSERT_EQ(answer.left_out.size(), 1u);
    EXPECT_EQ(answer.left_out[0].first, 2);
    EXPECT_NE(answer.left_out[0].second.find("rank 2 sent no heartbeat"), std::string::npos)
        << answer.left_out[0].second;
  }
  // Rank 2 comes after all: it reads the decision and learns that it is no longer a member.
  PeerSilence silence(store, ranks_of(4), quick(), true);
  AgreementRound late;
  late.rank = 2;
  late.size = 4;
  late.what = "test agreement";
  try {
    agree_in_store(*store, late, 0, silence);
    FAIL() << "a rank left out took part";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Revoked);
    EXPECT_NE(std::string(e.what()).find("decided without this rank"), std::string::npos) << e.what();
  }
}

TEST(FaultAgreement, ARankThatLeftIsLeftOutAtOnce) {
  auto store = std::make_shared<MemoryStore>();
  store->set("liveness/left/1", "1");
  const auto start = Clock::now();
  const auto answers = agree_on_threads(store, 3, {0, 2}, true);
  EXPECT_LT(Clock::now() - start, 2s);  // no heartbeat timeout to wait for
  EXPECT_EQ(answers[0].participants, (std::vector<int>{0, 2}));
  EXPECT_NE(answers[2].left_out.at(0).second.find("destroyed its communicator"), std::string::npos);
}

// A watcher's monitor found rank 2 silent (its verdict, with the count it stopped at, is in the store):
// the agreement leaves it out at once instead of timing its silence afresh for another 30 s timeout.
TEST(FaultAgreement, ARankAWatcherFoundSilentIsLeftOutAtOnce) {
  auto store = std::make_shared<MemoryStore>();
  store->set("liveness/beats/2", "7");
  store->set("liveness/silent/2", "7");
  LivenessSettings slow = quick();
  slow.timeout = 30s;
  const auto start = Clock::now();
  const auto answers = agree_on_threads(store, 4, {0, 1, 3}, true, 20s, slow);
  EXPECT_LT(Clock::now() - start, 10s);
  for (int rank : {0, 1, 3}) {
    const Agreement& answer = answers[static_cast<std::size_t>(rank)];
    EXPECT_EQ(answer.participants, (std::vector<int>{0, 1, 3})) << "rank " << rank;
    EXPECT_NE(answer.left_out.at(0).second.find("as its watcher found"), std::string::npos)
        << answer.left_out.at(0).second;
  }
}

// The verdict no longer holds once the rank beats again (a stopped rank that was continued): it is
// timed as any other, here until the deadline.
TEST(FaultAgreement, AWatchersVerdictLapsesOnceTheRankBeatsAgain) {
  auto store = std::make_shared<MemoryStore>();
  store->set("liveness/beats/2", "8");
  store->set("liveness/silent/2", "7");
  LivenessSettings slow = quick();
  slow.timeout = 30s;
  const auto answers = agree_on_threads(store, 4, {0, 1, 3}, true, 300ms, slow);
  for (int rank : {0, 1, 3})
    EXPECT_NE(answers[static_cast<std::size_t>(rank)].left_out.at(0).second.find("before the deadline"),
              std::string::npos)
        << answers[static_cast<std::size_t>(rank)].left_out.at(0).second;
}

// Without heartbeats (the monitor off) only the deadline tells a rank that never comes.
TEST(FaultAgreement, WithoutHeartbeatsTheDeadlineLeavesAnAbsentRankOut) {
  auto store = std::make_shared<MemoryStore>();
  const auto answers = agree_on_threads(store, 3, {0, 1}, false, 300ms);
  for (int rank : {0, 1}) {
    EXPECT_EQ(answers[static_cast<std::size_t>(rank)].participants, (std::vector<int>{0, 1}));
    EXPECT_NE(answers[static_cast<std::size_t>(rank)].left_out.at(0).second.find("before the deadline"),
              std::string::npos);
  }
}

// A rank in a shrink while another agrees: every one of them is told, none waits for the other.
TEST(FaultAgreement, RanksThatCallDifferentThingsAllGetAMismatch) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank : {0, 1})
    threads.emplace_back([&, rank] {
      PeerSilence silence(store, ranks_of(2), quick(), true);
      AgreementRound round;
      round.rank = rank;
      round.size = 2;
      round.purpose = rank == 0 ? "agreement" : "shrink";
      round.what = "test agreement";
      try {
        agree_in_store(*store, round, 1, silence);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::Mismatch) errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  for (auto& thread : threads) thread.join();
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("ranks disagree on what this is"), std::string::npos) << error;
    EXPECT_NE(error.find("for shrink"), std::string::npos) << error;
  }
}

TEST(FaultAgreement, ADecisionSurvivesItsEncoding) {
  Agreement agreement;
  agreement.value = 0xdeadbeef;
  agreement.participants = {0, 3, 5};
  agreement.left_out = {{1, "rank 1 sent no heartbeat\nfor 2 s"}, {2, "rank 2 destroyed its communicator"}};
  agreement.mismatch = "rank 3 came for shrink";
  const Agreement back = Agreement::decode(agreement.encode());
  EXPECT_EQ(back.mismatch, agreement.mismatch);
  EXPECT_EQ(back.value, agreement.value);
  EXPECT_EQ(back.participants, agreement.participants);
  ASSERT_EQ(back.left_out.size(), 2u);
  EXPECT_EQ(back.left_out[0].second, "rank 1 sent no heartbeat for 2 s");  // one line each
  EXPECT_THROW(Agreement::decode("votes 0=1"), Error);
}

}  // namespace
}  // namespace canopy::collectives
