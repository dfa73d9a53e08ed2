// Messages a person reads about a message on the wire (a mismatch, a timeout) name its algorithm.
#include <gtest/gtest.h>

#include "canopy/error.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "transport/envelope.hpp"
#include "transport/frame.hpp"

namespace canopy {
namespace {

TEST(AlgorithmNames, EnvelopesNameTheirAlgorithm) {
  transport::Envelope envelope;
  envelope.collective = Collective::AllReduce;
  envelope.algorithm =
      collectives::algorithm_index(*collectives::find_algorithm(Collective::AllReduce, "ring"));
  EXPECT_NE(transport::describe(envelope).find(", ring, root 0"), std::string::npos)
      << transport::describe(envelope);
  envelope.algorithm = 200;  // no table has it: the index, as it came
  EXPECT_NE(transport::describe(envelope).find("algorithm 200"), std::string::npos)
      << transport::describe(envelope);
}

TEST(AlgorithmNames, AMismatchNamesBothSidesAlgorithms) {
  transport::Envelope expected;
  expected.collective = Collective::Broadcast;
  expected.algorithm =
      collectives::algorithm_index(*collectives::find_algorithm(Collective::Broadcast, "binomial"));
  transport::FrameHeader arrived{.envelope = expected, .payload_bytes = 0};
  arrived.envelope.algorithm =
      collectives::algorithm_index(*collectives::find_algorithm(Collective::Broadcast, "chain"));
  try {
    transport::check_frame(arrived, expected, 0, 1, 0);
    FAIL() << "no mismatch";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("binomial"), std::string::npos) << message;
    EXPECT_NE(message.find("chain"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace canopy
