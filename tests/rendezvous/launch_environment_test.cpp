// parse_launch_environment: each launcher's variables, the precedence between them, and each error
// naming the variable a person has to fix.
#include <gtest/gtest.h>

#include <string>

#include "canopy/error.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/pmix_exchange.hpp"
#include "tests/rendezvous/config_error.hpp"

namespace canopy::rendezvous {
namespace {

TEST(LaunchEnvironment, NoLauncherIsOneProcess) {
  auto info = parse_launch_environment({});
  EXPECT_EQ(info.source, "default");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, -1);
  EXPECT_TRUE(info.store_host.empty());
  EXPECT_EQ(info.job_token, "");
  EXPECT_EQ(info.restart_count, 0);
}

// canopy-run --elastic: every rank meets in round 0, whatever its restart count (which counts
// replacements); a replacement joins instead of forming the group.
TEST(LaunchEnvironment, AnElasticJobHasOneRoundAndAReplacementJoinsIt) {
  const EnvMap member{{"CANOPY_RANK", "2"},
                      {"CANOPY_WORLD_SIZE", "4"},
                      {"CANOPY_MASTER_ADDR", "127.0.0.1"},
                      {"CANOPY_MASTER_PORT", "29500"},
                      {"CANOPY_ELASTIC", "3:4"}};
  auto info = parse_launch_environment(member);
  ASSERT_TRUE(info.elastic);
  EXPECT_EQ(info.elastic->min, 3);
  EXPECT_EQ(info.elastic->max, 4);
  EXPECT_FALSE(info.elastic_join);
  EXPECT_EQ(info.store_round(), 0);

  EnvMap replacement = member;
  replacement["CANOPY_ELASTIC_JOIN"] = "1";
  replacement["CANOPY_RESTART_COUNT"] = "3";
  info = parse_launch_environment(replacement);
  EXPECT_TRUE(info.elastic_join);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.restart_count, 3);
  EXPECT_EQ(info.store_round(), 0);

  EnvMap restarted = member;
  restarted.erase("CANOPY_ELASTIC");
  restarted["CANOPY_RESTART_COUNT"] = "3";
  EXPECT_EQ(parse_launch_environment(restarted).store_round(), 3);
}

TEST(LaunchEnvironment, ElasticVariablesThatMakeNoSenseAreConfigErrors) {
  const EnvMap base{{"CANOPY_RANK", "0"},
                    {"CANOPY_WORLD_SIZE", "2"},
                    {"CANOPY_MASTER_ADDR", "127.0.0.1"},
                    {"CANOPY_MASTER_PORT", "29500"}};
  EnvMap malformed = base;
  malformed["CANOPY_ELASTIC"] = "2";
  EXPECT_NE(config_error(malformed).find("CANOPY_ELASTIC '2' is not MIN:MAX"), std::string::npos);
  EnvMap join_alone = base;
  join_alone["CANOPY_ELASTIC_JOIN"] = "1";
  EXPECT_NE(config_error(join_alone).find("CANOPY_ELASTIC_JOIN=1 needs CANOPY_ELASTIC=MIN:MAX"),
            std::string::npos);
}

TEST(LaunchEnvironment, Torchrun) {
  auto info = parse_launch_environment({{"RANK", "3"},
                                        {"WORLD_SIZE", "8"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "node0"},
                                        {"MASTER_PORT", "1234"},
                                        {"TORCHELASTIC_RESTART_COUNT", "2"},
                                        {"TORCHELASTIC_RUN_ID", "abc"},
                                        {"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.store_host, "node0");
  EXPECT_EQ(info.store_port, 1234);
  EXPECT_EQ(info.restart_count, 2);
  EXPECT_EQ(info.job_token, "torchelastic-abc");
  EXPECT_FALSE(info.store_hosted_externally);
}

TEST(LaunchEnvironment, TorchrunsAgentStoreNeedsACanopyPort) {
  EnvMap env{{"RANK", "1"},
             {"WORLD_SIZE", "2"},
             {"MASTER_ADDR", "node0"},
             {"MASTER_PORT", "29500"},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  std::string message = config_error(env);
  EXPECT_MENTIONS(message, "TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_MENTIONS(message, "CANOPY_MASTER_PORT");
  env["CANOPY_MASTER_PORT"] = "29600";
  auto info = parse_launch_environment(env);
  EXPECT_FALSE(info.store_hosted_externally);  // rank 0 hosts Canopy's store on 29600
  EXPECT_EQ(info.store_port, 29600);
  EXPECT_EQ(info.store_host, "node0");
}

TEST(LaunchEnvironment, CanopyVariablesComeFirst) {
  auto info = parse_launch_environment({{"CANOPY_RANK", "1"},
                                        {"CANOPY_WORLD_SIZE", "2"},
                                        {"RANK", "1"},
                                        {"WORLD_SIZE", "2"},
                                        {"CANOPY_MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_ADDR", "elsewhere"},
                                        {"CANOPY_MASTER_PORT", "4000"},
                                        {"MASTER_PORT", "5000"},
                                        {"CANOPY_STORE_HOSTED", "1"},
                                        {"CANOPY_JOB_TOKEN", "secret"},
                                        {"SLURM_JOB_ID", "77"},
                                        {"CANOPY_RESTART_COUNT", "4"},
                                        {"TORCHELASTIC_RESTART_COUNT", "9"}});
  EXPECT_EQ(info.source, "canopy");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.store_host, "127.0.0.1");
  EXPECT_EQ(info.store_port, 4000);
  EXPECT_TRUE(info.store_hosted_externally);
  EXPECT_EQ(info.job_token, "secret");
  EXPECT_EQ(info.restart_count, 4);
  EXPECT_EQ(info.local_rank, -1);  // not given: derived through the store
  EXPECT_EQ(info.local_world_size, -1);
}

TEST(LaunchEnvironment, Slurm) {
  auto info = parse_launch_environment({{"SLURM_PROCID", "5"},
                                        {"SLURM_NTASKS", "7"},
                                        {"SLURM_LOCALID", "1"},
                                        {"SLURM_NODEID", "2"},
                                        {"SLURM_TASKS_PER_NODE", "2(x2),3"},
                                        {"SLURM_JOB_ID", "4242"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 7);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 3);
  EXPECT_EQ(info.store_port, 29500);
  EXPECT_EQ(info.job_token, "slurm-4242.0");
  EXPECT_FALSE(info.store_hosted_externally);

  auto per_node = parse_launch_environment({{"SLURM_STEP_ID", "0"},
                                            {"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "8"},
                                            {"SLURM_NTASKS_PER_NODE", "4"},
                                            {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(per_node.local_world_size, 4);
  auto uneven_without_node = parse_launch_environment({{"SLURM_STEP_ID", "0"},
                                                       {"SLURM_PROCID", "0"},
                                                       {"SLURM_NTASKS", "5"},
                                                       {"SLURM_TASKS_PER_NODE", "3,2"},
                                                       {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(uneven_without_node.local_world_size, -1);
  auto even = parse_launch_environment({{"SLURM_STEP_ID", "0"},
                                        {"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                        {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(even.local_world_size, 4);
  EXPECT_MENTIONS(config_error({{"SLURM_STEP_ID", "0"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "8"},
                                {"SLURM_TASKS_PER_NODE", "4(x2"},
                                {"MASTER_ADDR", "n0"}}),
                  "SLURM_TASKS_PER_NODE");
  EXPECT_MENTIONS(config_error({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
                  "MASTER_ADDR");
}

// Found by fuzz/launch_environment_fuzzer: a SLURM local world size above the world size was refused
// with "=3 must be between 1 and the world size 1", naming no variable.
TEST(LaunchEnvironment, SlurmLocalWorldSizeAboveTheWorldNamesItsVariable) {
  EXPECT_MENTIONS(config_error({{"SLURM_STEP_ID", "0"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "1"},
                                {"SLURM_NODEID", "1"},
                                {"SLURM_TASKS_PER_NODE", "4(x1),3"},
                                {"MASTER_ADDR", "node0"}}),
                  "SLURM_TASKS_PER_NODE (this node's entry)=3 must be between 1 and the world size 1");
  EXPECT_MENTIONS(config_error({{"SLURM_STEP_ID", "0"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "2"},
                                {"SLURM_NTASKS_PER_NODE", "4"},
                                {"MASTER_ADDR", "node0"}}),
                  "SLURM_NTASKS_PER_NODE=4 must be between 1 and the world size 2");
}

TEST(LaunchEnvironment, OpenMpiAndPmi) {
  auto ompi = parse_launch_environment({{"OMPI_COMM_WORLD_RANK", "2"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"OMPI_MCA_ess_base_jobid", "99"},
                                        {"MASTER_ADDR", "h"}});
  EXPECT_EQ(ompi.source, "openmpi");
  EXPECT_EQ(ompi.rank, 2);
  EXPECT_EQ(ompi.world_size, 4);
  EXPECT_EQ(ompi.local_rank, 0);
  EXPECT_EQ(ompi.local_world_size, 2);
  EXPECT_EQ(ompi.job_token, "ompi-99");

  auto pmi =
      parse_launch_environment({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"CANOPY_STORE_FILE", "/shared/x"}});
  EXPECT_EQ(pmi.source, "pmi");
  EXPECT_EQ(pmi.rank, 1);
  EXPECT_EQ(pmi.world_size, 3);
  EXPECT_EQ(pmi.local_rank, -1);
  EXPECT_EQ(pmi.store_file, "/shared/x");  // no address needed with a FileStore
}

TEST(LaunchEnvironment, MissingOrImpossibleValuesNameTheVariable) {
  EXPECT_MENTIONS(config_error({{"RANK", "0"}}), "WORLD_SIZE");
  EXPECT_MENTIONS(config_error({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}), "RANK");
  EXPECT_MENTIONS(config_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}}), "RANK=4");
  EXPECT_MENTIONS(config_error({{"RANK", "-1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}}), "RANK=-1");
  EXPECT_MENTIONS(config_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE=0");
  EXPECT_MENTIONS(config_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), "RANK");
  EXPECT_MENTIONS(config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "MASTER_ADDR");
  EXPECT_MENTIONS(
      config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
      "MASTER_PORT=70000");
  EXPECT_MENTIONS(
      config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"CANOPY_MASTER_PORT", "0"}}),
      "CANOPY_MASTER_PORT");
  EXPECT_MENTIONS(config_error({{"RANK", "0"},
                                {"WORLD_SIZE", "4"},
                                {"LOCAL_RANK", "2"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "h"}}),
                  "LOCAL_RANK=2");
  EXPECT_MENTIONS(
      config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}, {"MASTER_ADDR", "h"}}),
      "LOCAL_WORLD_SIZE=3");
  EXPECT_MENTIONS(
      config_error(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"CANOPY_STORE_HOSTED", "maybe"}}),
      "CANOPY_STORE_HOSTED");
  EXPECT_MENTIONS(config_error({{"CANOPY_STORE_HOSTED", "1"}}),
                  "MASTER_ADDR");  // a hosted store needs an address
  EXPECT_MENTIONS(
      config_error(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"TORCHELASTIC_RESTART_COUNT", "-2"}}),
      "TORCHELASTIC_RESTART_COUNT");
}

TEST(LaunchEnvironment, ContradictingLaunchersNameBothVariables) {
  std::string message = config_error({{"RANK", "1"},
                                      {"WORLD_SIZE", "4"},
                                      {"SLURM_STEP_ID", "0"},
                                      {"SLURM_PROCID", "2"},
                                      {"SLURM_NTASKS", "4"},
                                      {"MASTER_ADDR", "h"}});
  EXPECT_MENTIONS(message, "RANK=1");
  EXPECT_MENTIONS(message, "SLURM_PROCID=2");
  message = config_error(
      {{"CANOPY_RANK", "0"}, {"CANOPY_WORLD_SIZE", "2"}, {"PMI_RANK", "1"}, {"MASTER_ADDR", "h"}});
  EXPECT_MENTIONS(message, "CANOPY_RANK=0");
  EXPECT_MENTIONS(message, "PMI_RANK=1");
  // Agreeing launchers are fine.
  auto agreeing = parse_launch_environment({{"RANK", "2"},
                                            {"WORLD_SIZE", "4"},
                                            {"SLURM_STEP_ID", "0"},
                                            {"SLURM_PROCID", "2"},
                                            {"SLURM_NTASKS", "4"},
                                            {"MASTER_ADDR", "h"}});
  EXPECT_EQ(agreeing.rank, 2);
}

// A batch script has SLURM_PROCID=0 and SLURM_NTASKS (the job's), but no step: what it starts directly is
// not one of the job's tasks.
TEST(LaunchEnvironment, SlurmsBatchScriptIsNotATask) {
  const EnvMap batch{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "0"}, {"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[0-1]"}};
  std::string message = config_error(batch);
  EXPECT_MENTIONS(message, "no SLURM_STEP_ID");
  EXPECT_MENTIONS(message, "start the ranks with srun");
  EnvMap single = batch;
  single["SLURM_NTASKS"] = "1";
  EXPECT_EQ(parse_launch_environment(single).world_size, 1);

  // mpirun inside the job: on the batch script's node its ranks inherit the script's SLURM variables...
  EnvMap mpirun_here = batch;
  mpirun_here.insert({{"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                      {"MASTER_ADDR", "n0"}});
  mpirun_here["OMPI_MCA_ess_base_jobid"] = "5";
  LaunchInfo info = parse_launch_environment(mpirun_here);
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.job_token, "ompi-5");  // not slurm-9 here and slurm-9.0 there
  // ... and on the others those of the srun step that started mpirun's daemon there (one task per node).
  EnvMap mpirun_there{{"SLURM_PROCID", "0"},
                      {"SLURM_NTASKS", "1"},
                      {"SLURM_STEP_ID", "0"},
                      {"SLURM_JOB_ID", "9"},
                      {"OMPI_COMM_WORLD_RANK", "2"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  mpirun_there["OMPI_MCA_ess_base_jobid"] = "5";
  if (pmix_built()) {
    info = parse_launch_environment(mpirun_there);
    EXPECT_EQ(info.source, "openmpi");
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.world_size, 4);
    EXPECT_EQ(info.job_token, "ompi-5");
  } else {
    // Ranks on several hosts find rank 0's store through PMIx; a build without it says how to give it.
    EXPECT_MENTIONS(config_error(mpirun_there), "no PMIx");
    EXPECT_MENTIONS(config_error(mpirun_there), "MASTER_ADDR");
  }

  // torchrun run by the batch script itself.
  EnvMap torchrun = batch;
  torchrun.insert({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(parse_launch_environment(torchrun).rank, 3);
}

TEST(LaunchEnvironment, AnOuterLaunchWithAnotherWorldSizeIsNotAContradiction) {
  // torchrun started by srun on 2 nodes: SLURM counts the 2 agents, torchrun the 8 workers.
  auto info = parse_launch_environment({{"RANK", "5"},
                                        {"WORLD_SIZE", "8"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "4"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"SLURM_PROCID", "1"},
                                        {"SLURM_NTASKS", "2"},
                                        {"SLURM_JOB_ID", "7"},
                                        {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.local_rank, 1);
}

}  // namespace
}  // namespace canopy::rendezvous
