// canopy-run starting ranks: their environment, their output, their arguments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "common/cpu_list.hpp"
#include "tests/launcher/launcher_runner.hpp"

namespace canopy::testing {
namespace {

TEST(CanopyRun, StartsEveryRankWithItsEnvironment) {
  LauncherResult r = run_launcher({"--nproc", "3", launcher_probe_path(), "env"}, {{"CANOPY_JOB_TOKEN", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto envs = environments_by_rank(r.out);
  ASSERT_EQ(envs.size(), 3u) << r.describe();
  std::set<std::string> ports, tokens;
  for (int rank = 0; rank < 3; ++rank) {
    auto& env = envs[rank];
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["CANOPY_RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["CANOPY_LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["CANOPY_STORE_HOSTED"], "1");
    EXPECT_EQ(env["CANOPY_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_TRUE(env["CANOPY_JOB_TOKEN"].size() == 32 &&
                env["CANOPY_JOB_TOKEN"].find_first_not_of("0123456789abcdef") == std::string::npos)
        << env["CANOPY_JOB_TOKEN"];
    int port = std::stoi(env["MASTER_PORT"]);
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
    ports.insert(env["MASTER_PORT"]);
    tokens.insert(env["CANOPY_JOB_TOKEN"]);
  }
  EXPECT_EQ(ports.size(), 1u) << "every rank must be told the same store port";
  EXPECT_EQ(tokens.size(), 1u) << "every rank must be given the same job token";
  EXPECT_EQ(r.err, "");
}

TEST(CanopyRun, PassesTheJobTokenFromTheEnvironment) {
  LauncherResult r = run_launcher({"--nproc", "2", launcher_probe_path(), "env"},
                                  {{"CANOPY_JOB_TOKEN", "shared-secret-42"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto envs = environments_by_rank(r.out);
  ASSERT_EQ(envs.size(), 2u) << r.describe();
  EXPECT_EQ(envs[0]["CANOPY_JOB_TOKEN"], "shared-secret-42");
  EXPECT_EQ(envs[1]["CANOPY_JOB_TOKEN"], "shared-secret-42");
}

TEST(CanopyRun, TwoJobsOnOneMachineGetDifferentPortsAndTokens) {
  LauncherResult a = run_launcher({launcher_probe_path(), "env"}, {{"CANOPY_JOB_TOKEN", ""}});
  LauncherResult b = run_launcher({launcher_probe_path(), "env"}, {{"CANOPY_JOB_TOKEN", ""}});
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  EXPECT_NE(environments_by_rank(a.out)[0]["CANOPY_JOB_TOKEN"],
            environments_by_rank(b.out)[0]["CANOPY_JOB_TOKEN"]);
}

TEST(CanopyRun, PrefixesWholeLinesAndNeverMixesRanksWithinALine) {
  constexpr int kRanks = 4, kLines = 300;
  LauncherResult r = run_launcher({"--nproc", std::to_string(kRanks), launcher_probe_path(),
                                   "lines:" + std::to_string(kLines), "stderr:complaint"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // Each line is known in full from its prefix and its place: any cut, mix or reordering shows.
  std::map<int, int> next_index;
  for (const std::string& line : lines_of(r.out)) {
    int prefix_rank = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "[%d] ", &prefix_rank), 1) << "no prefix: '" << line << "'";
    ASSERT_TRUE(prefix_rank >= 0 && prefix_rank < kRanks) << line;
    int index = next_index[prefix_rank]++;
    std::string expected = fmt::format("[{}] line {} {} {}", prefix_rank, prefix_rank, index,
                                       std::string(40 + index % 7, static_cast<char>('a' + prefix_rank)));
    ASSERT_EQ(line, expected) << "a line cut, mixed or out of order";
  }
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(next_index[rank], kLines) << "rank " << rank;
  // stderr stays stderr, prefixed too.
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(count_of(r.err, "[" + std::to_string(rank) + "] complaint\n"), 1) << r.err;
  }
  EXPECT_EQ(count_of(r.out, "complaint"), 0);
}

TEST(CanopyRun, FlushesAnUnfinishedLastLine) {
  LauncherResult r = run_launcher({"--nproc", "2", launcher_probe_path(), "partial:no-newline"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(count_of(r.out, "[0] no-newline\n"), 1) << r.out;
  EXPECT_EQ(count_of(r.out, "[1] no-newline\n"), 1) << r.out;
}

TEST(CanopyRun, NoPrefixPassesOutputThroughUntouched) {
  LauncherResult r = run_launcher({"--no-prefix", launcher_probe_path(), "partial:raw", "stderr:err-text"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "raw");
  EXPECT_EQ(r.err, "err-text\n");
}

TEST(CanopyRun, LeavesTheProgramsArgumentsAlone) {
  LauncherResult r =
      run_launcher({"--nproc", "1", "--", launcher_probe_path(), "args", "--nproc", "5", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "[0] argv: args --nproc 5 --help\n");
}

TEST(CanopyRun, RanksInheritOnlyTheStandardDescriptors) {
  // canopy-run holds the store's sockets, the signalfd and the other ranks' pipes: none may leak into a rank.
  LauncherResult r = run_launcher({"--nproc", "2", launcher_probe_path(), "fds"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(count_of(r.out, "] open-fds=0 1 2\n"), 2) << r.describe();
}

// --bind-to core: each rank on one CPU of canopy-run's own, in order (wrapping around past the last); by
// default every rank may use all of them.
TEST(CanopyRun, BindToCorePutsEachRankOnACpuOfItsOwn) {
  const std::vector<int> cpus = allowed_cpus();
  LauncherResult bound = run_launcher({"--nproc", "3", "--bind-to", "core", launcher_probe_path(), "cpus"});
  ASSERT_EQ(bound.exit_code, 0) << bound.describe();
  for (int local = 0; local < 3; ++local)
    EXPECT_NE(bound.out.find(
                  fmt::format("[{}] cpus={}\n", local, cpus[static_cast<std::size_t>(local) % cpus.size()])),
              std::string::npos)
        << bound.describe();
  LauncherResult free = run_launcher({"--nproc", "2", launcher_probe_path(), "cpus"});
  ASSERT_EQ(free.exit_code, 0) << free.describe();
  EXPECT_EQ(count_of(free.out, fmt::format("] cpus={}\n", format_cpu_list(cpus))), 2) << free.describe();
  EXPECT_NE(run_launcher({"--bind-to", "socket", launcher_probe_path(), "cpus"}).exit_code, 0);
}

TEST(CanopyRun, HelpListsTheOptions) {
  LauncherResult r = run_launcher({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("--max-restarts"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace canopy::testing
