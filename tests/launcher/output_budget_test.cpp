// The rule that decides whether canopy-run can afford its ranks' output pipes (launcher/output_budget.hpp).
#include "launcher/output_budget.hpp"

#include <gtest/gtest.h>

#include <string>

namespace canopy::launcher {
namespace {

DescriptorBudget budget(rlim_t limit, int ranks, int open_now = 10) {
  DescriptorBudget b;
  b.limit = limit;
  b.open_now = open_now;
  b.local_ranks = ranks;
  b.store_clients = ranks;  // one node, hosting the store
  return b;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OutputBudget, CountsTwoPipesAndOneStoreConnectionPerRank) {
  const DescriptorBudget b = budget(1024, 512, 9);
  EXPECT_EQ(b.pipes(), 1024u);
  EXPECT_EQ(b.store_connections(), 512u);
  EXPECT_EQ(b.needed(true), 9u + kDescriptorHeadroom + 1024u + 512u);
  EXPECT_EQ(b.needed(false), 9u + kDescriptorHeadroom + 512u);

  DescriptorBudget node0 = b;
  node0.local_ranks = 256;
  node0.store_clients = 512;  // two nodes of 256: node 0's store serves both
  node0.other_nodes = 1;
  EXPECT_EQ(node0.pipes(), 512u);
  EXPECT_EQ(node0.store_connections(), 513u);
  DescriptorBudget node1 = node0;
  node1.store_clients = 0;
  node1.other_nodes = 0;
  EXPECT_EQ(node1.needed(true), 9u + kDescriptorHeadroom + 512u);
}

TEST(OutputBudget, AutoPrefixesWhileEverythingFitsAndSaysNothing) {
  // 40 ranks under 256: 80 pipes + 40 connections + 10 + 16 = 146.
  OutputChoice c = choose_output(OutputMode::Auto, budget(256, 40));
  EXPECT_TRUE(c.prefixed);
  EXPECT_EQ(c.notice, "");
  EXPECT_EQ(c.warning, "");
  EXPECT_EQ(c.refusal, "");
  EXPECT_TRUE(has(c.summary, "output prefixed under a descriptor limit of 256: 80 pipes")) << c.summary;
  EXPECT_TRUE(choose_output(OutputMode::Auto, budget(RLIM_INFINITY, 4000)).prefixed);
  // Exactly at the limit still fits: the spare is in the count.
  EXPECT_TRUE(choose_output(OutputMode::Auto, budget(146, 40)).prefixed);
  EXPECT_FALSE(choose_output(OutputMode::Auto, budget(145, 40)).prefixed);
}

TEST(OutputBudget, AutoGoesDirectWithOneLineNamingTheLimitTheCountAndTheWayBack) {
  // 100 ranks under 256: prefixed needs 200 + 100 + 26 = 326; direct 126 fits.
  OutputChoice c = choose_output(OutputMode::Auto, budget(256, 100));
  EXPECT_FALSE(c.prefixed);
  EXPECT_EQ(c.warning, "");
  EXPECT_EQ(c.refusal, "");
  EXPECT_EQ(c.notice.find('\n'), std::string::npos) << c.notice;
  EXPECT_TRUE(has(c.notice, "100 ranks write straight to canopy-run's stdout and stderr")) << c.notice;
  EXPECT_TRUE(has(c.notice, "200 pipes (2 per rank), 100 store connections (1 per rank)")) << c.notice;
  EXPECT_TRUE(has(c.notice, "326 descriptors, over the limit of 256 (RLIMIT_NOFILE)")) << c.notice;
  EXPECT_TRUE(has(c.notice, "ulimit -n 326")) << c.notice;
  // 200 pipes + 26 fit alone: a program that does not use the store can have them back.
  EXPECT_TRUE(has(c.notice, "--output prefixed if the program does not use the store")) << c.notice;

  OutputChoice big = choose_output(OutputMode::Auto, budget(256, 128));  // 256 pipes alone do not fit
  EXPECT_FALSE(big.prefixed);
  EXPECT_FALSE(has(big.notice, "--output prefixed")) << big.notice;
}

TEST(OutputBudget, WarnsWhenTheStoresConnectionsDoNotFit) {
  // 512 ranks under 1024: direct, 512 connections and 25 fit, with nothing to warn about.
  OutputChoice fits = choose_output(OutputMode::Auto, budget(1024, 512, 9));
  EXPECT_FALSE(fits.prefixed);
  EXPECT_EQ(fits.warning, "");
  EXPECT_TRUE(has(fits.summary, "512 store connections (1 per rank)")) << fits.summary;

  // 1024 ranks under 1024: even 1024 connections and 25 are over it.
  OutputChoice c = choose_output(OutputMode::Auto, budget(1024, 1024, 9));
  EXPECT_EQ(c.warning.find('\n'), std::string::npos) << c.warning;
  EXPECT_TRUE(has(c.warning, "may not fit")) << c.warning;
  EXPECT_TRUE(has(c.warning, "1024 store connections (1 per rank)")) << c.warning;
  EXPECT_TRUE(has(c.warning, "1049 descriptors, over the limit of 1024")) << c.warning;
  EXPECT_TRUE(has(c.warning, "ulimit -n 1049")) << c.warning;

  DescriptorBudget other_node = budget(1024, 512, 9);
  other_node.store_clients = 0;  // node K > 0 hosts no store: nothing to warn about
  EXPECT_EQ(choose_output(OutputMode::Direct, other_node).warning, "");
}

TEST(OutputBudget, PrefixedIsObeyedWhileItsPipesFitAndRefusedBeforeAnythingStartsOtherwise) {
  OutputChoice c = choose_output(OutputMode::Prefixed, budget(256, 100));  // pipes 200 + 26 fit
  EXPECT_TRUE(c.prefixed);
  EXPECT_EQ(c.refusal, "");
  EXPECT_EQ(c.notice, "");
  EXPECT_TRUE(has(c.warning, "326 descriptors")) << c.warning;  // the store's connections do not

  OutputChoice refused = choose_output(OutputMode::Prefixed, budget(256, 128));  // 256 + 26 do not
  EXPECT_TRUE(has(refused.refusal, "--output prefixed for 128 ranks needs 256 pipes (2 per rank)"))
      << refused.refusal;
  EXPECT_TRUE(has(refused.refusal, "282 descriptors, over the limit of 256")) << refused.refusal;
  EXPECT_TRUE(has(refused.refusal, "at least 410, the store's connections included (ulimit -n 410)"))
      << refused.refusal;
  EXPECT_TRUE(has(refused.refusal, "--output auto or direct")) << refused.refusal;
}

TEST(OutputBudget, DirectNeverPrefixesAndIsQuiet) {
  OutputChoice c = choose_output(OutputMode::Direct, budget(256, 40));
  EXPECT_FALSE(c.prefixed);
  EXPECT_EQ(c.notice, "");
  EXPECT_EQ(c.warning, "");
  EXPECT_TRUE(has(c.summary,
                  "output direct under a descriptor limit of 256: 40 store connections (1 per rank), "
                  "canopy-run's own 10 + 16 spare: 66 descriptors"))
      << c.summary;
}

TEST(OutputBudget, NamesASoftLimitThatCouldNotBeRaised) {
  DescriptorBudget b = budget(256, 100);
  b.limit_is_hard = false;
  EXPECT_TRUE(has(choose_output(OutputMode::Auto, b).notice, "soft; canopy-run could not raise it"));
}

TEST(OutputBudget, TheCurrentBudgetCountsThisProcesssDescriptors) {
  DescriptorBudget b = current_descriptor_budget(3, 6, 1);
  EXPECT_GE(b.open_now, 3);  // at least the standard streams
  EXPECT_EQ(b.local_ranks, 3);
  EXPECT_EQ(b.store_connections(), 7u);
}

}  // namespace
}  // namespace canopy::launcher
