// The kernel's cpulist text both ways, and what this process may run on.
#include "common/cpu_list.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"

namespace canopy {
namespace {

TEST(CpuList, FormatsRangesAsTheKernelDoes) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(CpuList, ParsesWhatItFormatsAndSortsDuplicatesAway) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5,1,1-2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  const std::vector<int> mine = allowed_cpus();
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(parse_cpu_list(format_cpu_list(mine)), mine);
}

TEST(CpuList, UsableCoresIsAtLeastOne) {
  EXPECT_GE(usable_cores(), 1);
  EXPECT_EQ(usable_cores(), static_cast<int>(allowed_cpus().size()));
}

TEST(CpuList, MalformedTextIsAProtocolError) {
  for (const char* bad : {"a", "1-", "3-1", "1,,2", "1,", "-1", "1 2", "99999"}) {
    try {
      parse_cpu_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Protocol) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace canopy
