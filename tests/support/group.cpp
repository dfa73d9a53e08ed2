#include "tests/support/group.hpp"

#include <gtest/gtest.h>

#include "canopy/store.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::testing {

CommunicatorOptions group_options(const std::string& job_token, std::chrono::milliseconds timeout) {
  CommunicatorOptions options;
  options.timeout = timeout;
  options.job_token = job_token;
  options.calibrate = false;
  options.local_rank = 0;
  options.local_size = 1;
  return options;
}

void run_group(int ranks, const std::function<void(Communicator&)>& body, const CommunicatorOptions& options,
               std::chrono::milliseconds limit) {
  TempDir dir;
  auto exits = run_processes(
      ranks,
      [&](int rank) {
        Communicator comm(open_file_store(dir.path()), rank, ranks, options);
        body(comm);
      },
      limit);
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << "rank " << rank << " " << exits[rank].describe();
}

}  // namespace canopy::testing
