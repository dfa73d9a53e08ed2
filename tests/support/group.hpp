// A communicator group of forked processes meeting through a file store: what most tests above the
// transport need.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "canopy/communicator.hpp"

namespace canopy::testing {

// Options for test groups: a short deadline, no start-up probe, one host.
CommunicatorOptions group_options(const std::string& job_token,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Runs body(comm) on `ranks` forked processes; a rank that throws or exits non-zero fails the test (gtest
// EXPECT in the parent, naming the rank and how it ended).
void run_group(int ranks, const std::function<void(Communicator&)>& body, const CommunicatorOptions& options,
               std::chrono::milliseconds limit = std::chrono::seconds(120));

}  // namespace canopy::testing
