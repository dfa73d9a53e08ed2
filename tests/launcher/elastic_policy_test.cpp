// What canopy-run --elastic does when a rank dies: replace it, go on without it, or stop the job.
#include "launcher/elastic_policy.hpp"

#include <gtest/gtest.h>

namespace canopy::launcher {
namespace {

const ElasticRange kThreeToFour{3, 4};

TEST(ElasticPolicy, ADeadRankIsReplacedWhileRestartsRemain) {
  DeathVerdict first = after_death(kThreeToFour, 2, GroupCount{3, 0, 0});
  EXPECT_EQ(first.action, AfterDeath::Replace);
  EXPECT_EQ(first.why, "replacement 1 of --max-restarts 2");
  EXPECT_EQ(after_death(kThreeToFour, 2, GroupCount{3, 0, 1}).action, AfterDeath::Replace);
}

TEST(ElasticPolicy, OnceTheRestartsAreSpentTheGroupGoesOnWithoutIt) {
  DeathVerdict spent = after_death(kThreeToFour, 2, GroupCount{3, 0, 2});
  EXPECT_EQ(spent.action, AfterDeath::GoOn);
  EXPECT_EQ(spent.why, "--max-restarts 2 is spent; 3 ranks go on (--elastic 3:4)");
  EXPECT_EQ(after_death(kThreeToFour, 0, GroupCount{3, 0, 0}).why,
            "--max-restarts 0 allows none; 3 ranks go on (--elastic 3:4)");
}

TEST(ElasticPolicy, FewerThanMinLeftStopsTheJobEvenWithRestartsLeft) {
  DeathVerdict below = after_death(kThreeToFour, 5, GroupCount{2, 0, 0});
  EXPECT_EQ(below.action, AfterDeath::StopTheJob);
  EXPECT_EQ(below.why, "2 ranks left (2 running, 0 finished), fewer than the 3 of --elastic 3:4");
  EXPECT_EQ(after_death(ElasticRange{1, 2}, 0, GroupCount{0, 0, 0}).action, AfterDeath::StopTheJob);
}

// Once a rank has finished the job is ending: nobody would grow to admit a replacement, but the
// finished ranks still count towards MIN.
TEST(ElasticPolicy, AfterARankFinishedNoneIsReplacedAndTheFinishedCount) {
  DeathVerdict ending = after_death(kThreeToFour, 2, GroupCount{1, 2, 0});
  EXPECT_EQ(ending.action, AfterDeath::GoOn);
  EXPECT_EQ(ending.why, "2 ranks finished already, so the job is ending; 1 rank goes on (--elastic 3:4)");
}

}  // namespace
}  // namespace canopy::launcher
