// SLURM's hostlist syntax: expansion, zero padding, several brackets in one name, and a clear refusal for
// every malformed list; and the same expansions as SLURM's own `scontrol show hostnames` where it is
// installed.
#include "rendezvous/slurm_hostlist.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "canopy/error.hpp"
#include "tests/support/config_error.hpp"

namespace canopy::rendezvous {
namespace {

using Hosts = std::vector<std::string>;

std::string refusal(const std::string& list) {
  std::string message = testing::config_error_of([&] { expand_hostlist(list, "SLURM_JOB_NODELIST"); });
  EXPECT_NE(message.find("SLURM_JOB_NODELIST="), std::string::npos) << message;
  // first_host_of_hostlist checks the whole list too.
  EXPECT_THROW(first_host_of_hostlist(list, "SLURM_JOB_NODELIST"), Error) << list;
  return message;
}

TEST(SlurmHostlist, ExpandsRangesListsAndPlainNames) {
  EXPECT_EQ(expand_hostlist("node[01-04,07],gpu3", "V"),
            (Hosts{"node01", "node02", "node03", "node04", "node07", "gpu3"}));
  EXPECT_EQ(expand_hostlist("solo", "V"), Hosts{"solo"});
  EXPECT_EQ(expand_hostlist("a,b[2-3]", "V"), (Hosts{"a", "b2", "b3"}));
  EXPECT_EQ(expand_hostlist("x[9-11]", "V"), (Hosts{"x9", "x10", "x11"}));
  EXPECT_EQ(expand_hostlist("n[5-5]", "V"), Hosts{"n5"});
  EXPECT_EQ(expand_hostlist("[1-3]", "V"), (Hosts{"1", "2", "3"}));
  EXPECT_EQ(expand_hostlist("n-1.ib,n-2.ib", "V"), (Hosts{"n-1.ib", "n-2.ib"}));
}

TEST(SlurmHostlist, PadsToTheWidthOfEachRangesFirstNumber) {
  EXPECT_EQ(expand_hostlist("n[001-3]", "V"), (Hosts{"n001", "n002", "n003"}));
  EXPECT_EQ(expand_hostlist("n[09-11]", "V"), (Hosts{"n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[8-010]", "V"), (Hosts{"n8", "n9", "n10"}));  // the end's zeros do not count
  EXPECT_EQ(expand_hostlist("n[01-2,5-006]", "V"), (Hosts{"n01", "n02", "n5", "n6"}));
}

TEST(SlurmHostlist, SeveralBracketsInOneNameMultiplyFirstSlowest) {
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[01-02]", "V"),
            (Hosts{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_hostlist("n[1-2][3-4]", "V"), (Hosts{"n13", "n14", "n23", "n24"}));
  EXPECT_EQ(first_host_of_hostlist("rack[3-4]-n[07,02]", "V"), "rack3-n07");
}

TEST(SlurmHostlist, KeepsSlurmsOrderAndRepeats) {
  EXPECT_EQ(expand_hostlist("n[3,1-2],n1", "V"), (Hosts{"n3", "n1", "n2", "n1"}));
}

TEST(SlurmHostlist, FirstHostNeedsNoExpansion) {
  EXPECT_EQ(first_host_of_hostlist("node[01-04,07],gpu3", "V"), "node01");
  EXPECT_EQ(first_host_of_hostlist("gpu3,node[01-04]", "V"), "gpu3");
  EXPECT_EQ(first_host_of_hostlist("big[000001-999999]", "V"), "big000001");
}

TEST(SlurmHostlist, RefusesMalformedListsSayingWhatAndWhere) {
  EXPECT_MENTIONS(refusal(""), "empty");
  EXPECT_MENTIONS(refusal("n[1-2"), "'[' without its ']'");
  EXPECT_MENTIONS(refusal("n1]"), "']' without its '['");
  EXPECT_MENTIONS(refusal("n[[1-2]]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[3-1]"), "end is below its start");
  EXPECT_MENTIONS(refusal("n[1--3]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[,1]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[1-]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[-1]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[0x1]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[+1]"), "not N or N-M");
  EXPECT_MENTIONS(refusal("n[1-2]-ib"), "text after a name's last bracket");
  EXPECT_MENTIONS(refusal("a[1-2]b,c"), "text after a name's last bracket");
  EXPECT_MENTIONS(refusal("a,,b"), "empty name");
  EXPECT_MENTIONS(refusal("a,"), "empty name");
  EXPECT_MENTIONS(refusal("a b"), "space");
  EXPECT_MENTIONS(refusal("a\nb"), "\\x0a");  // shown escaped
  EXPECT_MENTIONS(refusal("n[1234567890123456789]"), "more than 18 digits");
  EXPECT_MENTIONS(refusal("n[1-3]]"), "(at position 6)");
}

TEST(SlurmHostlist, RefusesListsOfMoreHostsThanTheLimitBeforeExpandingThem) {
  EXPECT_MENTIONS(refusal("n[1-2000000]"), "more than 1048576 hosts");
  EXPECT_MENTIONS(refusal("a[1-1024][1-1025]"), "more than 1048576 hosts");
  // A product that overflows 64 bits is still counted as too many.
  EXPECT_MENTIONS(refusal("a[0-999999999999999999][0-999999999999999999][0-999999999999999999]"),
                  "more than 1048576 hosts");
  EXPECT_EQ(expand_hostlist("a[1-1024][1-1024]", "V").size(), kMaxHostlistHosts);
  // A caller may ask for a lower limit, never a higher one.
  EXPECT_EQ(expand_hostlist("n[1-5]", "V", 5).size(), 5u);
  EXPECT_THROW(expand_hostlist("n[1-5],m", "V", 5), Error);
  EXPECT_THROW(expand_hostlist("n[1-2000000]", "V", 1u << 30), Error);
}

// SLURM's own expansion of the same lists, where scontrol is installed (it needs only a slurm.conf to
// read, no running daemon).
TEST(SlurmHostlist, ExpandsAsScontrolDoes) {
  if (::system("command -v scontrol >/dev/null 2>&1") != 0) GTEST_SKIP() << "scontrol is not installed";
  std::string dir_template = (std::filesystem::temp_directory_path() / "canopy-hostlist-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir_template.data()), nullptr);
  const std::filesystem::path dir = dir_template;
  std::ofstream(dir / "slurm.conf") << "ClusterName=canopy\nSlurmctldHost=localhost\n"
                                       "NodeName=localhost CPUs=1 State=UNKNOWN\n"
                                       "PartitionName=p Nodes=ALL Default=YES\n";
  for (const std::string list :
       {"node[01-04,07],gpu3", "rack[1-2]-n[01-02]", "n[1-2][3-4]", "n[001-10]", "n[8-010]", "a,b[2-3]",
        "x[9-11]", "n[01-2,5-006]", "n[3,1-2],n1", "[1-3]", "n[4294967295-4294967296]", "gpu-a100-7"}) {
    std::string command =
        "SLURM_CONF=" + (dir / "slurm.conf").string() + " scontrol show hostnames '" + list + "' 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    Hosts expected;
    std::array<char, 256> line{};
    while (std::fgets(line.data(), line.size(), pipe) != nullptr) {
      std::string host(line.data());
      if (!host.empty() && host.back() == '\n') host.pop_back();
      expected.push_back(host);
    }
    EXPECT_EQ(::pclose(pipe), 0) << command;
    EXPECT_EQ(expand_hostlist(list, "V"), expected) << list;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace canopy::rendezvous
