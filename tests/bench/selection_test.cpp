// What the command line names: collectives and algorithms, and the errors for names that do not exist.
#include "bench/collectives/selection.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace canopy::bench {
namespace {

TEST(Selection, CollectivesByCommandName) {
  EXPECT_EQ(collectives_named("all").size(), 9u);
  ASSERT_EQ(collectives_named("reducescatter").size(), 1u);
  EXPECT_EQ(collectives_named("reducescatter")[0], Collective::ReduceScatter);
  EXPECT_EQ(command_name(Collective::AllGather), "allgather");
}

TEST(Selection, UnknownCollectiveListsTheKnownOnes) {
  try {
    collectives_named("alltoallv");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'alltoallv'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
  }
}

TEST(Selection, AlgorithmLists) {
  auto names = algorithms_for(Collective::AllReduce, "ring,,tree");
  EXPECT_EQ(names, (std::vector<std::string>{"ring", "tree"}));
  EXPECT_EQ(algorithms_for(Collective::Broadcast, "auto"), std::vector<std::string>{"auto"});
  EXPECT_GE(algorithms_for(Collective::Broadcast, "all").size(), 4u);
  auto every_and_auto = algorithms_for(Collective::AllReduce, "all,auto");
  EXPECT_EQ(every_and_auto.size(), algorithms_for(Collective::AllReduce, "all").size() + 1);
  EXPECT_EQ(every_and_auto.back(), "auto");
  EXPECT_THROW(algorithms_for(Collective::Broadcast, "auto", /*allow_auto=*/false), std::invalid_argument);
  EXPECT_THROW(algorithms_for(Collective::AllReduce, ""), std::invalid_argument);
  try {
    algorithms_for(Collective::Broadcast, "ring");
    FAIL() << "broadcast has no ring";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("binomial"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace canopy::bench
