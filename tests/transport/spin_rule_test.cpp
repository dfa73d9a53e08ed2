#include "transport/spin_rule.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "canopy/error.hpp"
#include "tests/support/scoped_env.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

using std::chrono::microseconds;

TEST(SpinRule, SpinsUpToFourRanksPerCore) {
  EXPECT_EQ(choose_spin(std::nullopt, 1, 2), kDefaultSpin);
  EXPECT_EQ(choose_spin(std::nullopt, 2, 2), kDefaultSpin);
  EXPECT_EQ(choose_spin(std::nullopt, 8, 64), kDefaultSpin);
  EXPECT_EQ(choose_spin(std::nullopt, 4, 2), kDefaultSpin);
  EXPECT_EQ(choose_spin(std::nullopt, 8, 2), kDefaultSpin);
}

TEST(SpinRule, BlocksWhenRanksOutnumberCoresMoreThanFourTimes) {
  EXPECT_EQ(choose_spin(std::nullopt, 9, 2), microseconds(0));
  EXPECT_EQ(choose_spin(std::nullopt, 64, 8), microseconds(0));
}

TEST(SpinRule, AnExplicitSettingWinsEitherWay) {
  EXPECT_EQ(choose_spin(microseconds(0), 1, 16), microseconds(0));
  EXPECT_EQ(choose_spin(microseconds(200), 8, 2), microseconds(200));
}

TEST(SpinRule, ASpinOverMemoryYieldsEveryRoundOnlyWhereRanksOutnumberCores) {
  EXPECT_EQ(looks_between_yields(2, 2), kLooksBetweenYields);
  EXPECT_EQ(looks_between_yields(1, 16), kLooksBetweenYields);
  EXPECT_EQ(looks_between_yields(3, 2), std::chrono::nanoseconds(0));
  EXPECT_EQ(looks_between_yields(8, 2), std::chrono::nanoseconds(0));
}

// CANOPY_SOCKET_SPIN_US is "not set" unless it is in the environment: 0 there means "never spin".
TEST(SpinRule, EnvironmentVariableIsOptional) {
  testing::ScopedEnv env;
  env.unset("CANOPY_SOCKET_SPIN_US");
  EXPECT_FALSE(TcpOptions::from_environment().spin.has_value());
  env.set("CANOPY_SOCKET_SPIN_US", "0");
  EXPECT_EQ(TcpOptions::from_environment().spin, microseconds(0));
  env.set("CANOPY_SOCKET_SPIN_US", "75");
  EXPECT_EQ(TcpOptions::from_environment().spin, microseconds(75));
  env.set("CANOPY_SOCKET_SPIN_US", "-1");
  EXPECT_THROW(TcpOptions::from_environment(), Error);
}

TEST(SpinBackoff, KeepsSpinningWhileSpinsPayOff) {
  SpinBackoff backoff;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(backoff.should_spin());
    backoff.record(i % 2 == 0);  // a miss now and then (a peer late to the call) changes nothing
  }
}

// Runs of misses: block 1, then 2, 4, ... waits without spinning, up to kLongestBackoff; one spin that
// pays off starts over.
TEST(SpinBackoff, BlocksForLongerAfterEachRunOfMisses) {
  SpinBackoff backoff;
  auto blocking_waits_after_a_run_of_misses = [&] {
    for (int i = 0; i < SpinBackoff::kMissesInARow; ++i) backoff.record(false);
    std::uint32_t blocked = 0;
    while (!backoff.should_spin()) ++blocked;
    return blocked;
  };
  backoff.record(false);
  backoff.record(false);
  EXPECT_TRUE(backoff.should_spin());  // fewer misses in a row than kMissesInARow
  EXPECT_EQ(blocking_waits_after_a_run_of_misses(), 1u);
  EXPECT_EQ(blocking_waits_after_a_run_of_misses(), 2u);
  EXPECT_EQ(blocking_waits_after_a_run_of_misses(), 4u);
  for (int i = 0; i < 20; ++i) blocking_waits_after_a_run_of_misses();
  EXPECT_EQ(blocking_waits_after_a_run_of_misses(), SpinBackoff::kLongestBackoff);
  backoff.record(true);
  EXPECT_EQ(blocking_waits_after_a_run_of_misses(), 1u);
}

}  // namespace
}  // namespace canopy::transport
