// Where the store is when no address is given: SLURM's first host and a port from the job and step ids,
// Open MPI's loopback or PMIx; and what keeps winning over them (an address, a store directory).
#include "rendezvous/store_address.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "canopy/error.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/pmix_exchange.hpp"
#include "tests/rendezvous/config_error.hpp"

namespace canopy::rendezvous {
namespace {

// What srun gives task `rank` of a 4-task step on node[01-02] (2 tasks per node).
EnvMap srun_task(int rank, const std::string& step = "0") {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", std::to_string(rank % 2)},
          {"SLURM_NODEID", std::to_string(rank / 2)},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURMD_NODENAME", rank < 2 ? "node01" : "node02"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", step},
          {"SLURM_JOB_NODELIST", "node[01-03],gpu7"},
          {"SLURM_STEP_NODELIST", "node[01-02]"}};
}

TEST(StoreAddress, UnderSlurmTheFirstHostOfTheStepsNodesAndAPortFromTheJobAndStep) {
  const LaunchInfo zero = parse_launch_environment(srun_task(0));
  EXPECT_EQ(zero.store_host, "node01");
  EXPECT_EQ(zero.store_port, derived_store_port(PortRange{}, 4242, 0));
  EXPECT_MENTIONS(zero.store_origin, "SLURM_STEP_NODELIST");
  EXPECT_MENTIONS(zero.store_origin, "SLURM_JOB_ID=4242");
  EXPECT_FALSE(zero.store_hosted_externally);  // rank 0 hosts it
  for (int rank = 1; rank < 4; ++rank) {
    const LaunchInfo other = parse_launch_environment(srun_task(rank));
    EXPECT_EQ(other.store_host, zero.store_host);
    EXPECT_EQ(other.store_port, zero.store_port);
  }
  // Without a step list (an older SLURM), the job's.
  EnvMap job_only = srun_task(1);
  job_only.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(parse_launch_environment(job_only).store_host, "node01");
}

TEST(StoreAddress, StepsOfOneJobGetPortsOfTheirOwn) {
  std::set<std::uint16_t> ports;
  for (int step = 0; step < 8; ++step)
    ports.insert(parse_launch_environment(srun_task(0, std::to_string(step))).store_port);
  EXPECT_EQ(ports.size(), 8u);
}

TEST(StoreAddress, DerivedPortsStayInTheRangeAndStepsAreConsecutive) {
  const PortRange range{40000, 40099};
  for (std::uint64_t job : {0ull, 1ull, 77ull, 4294967295ull, 18446744073709551615ull}) {
    const std::uint16_t first = derived_store_port(range, job, 0);
    for (std::uint64_t step = 0; step < 250; ++step) {
      const std::uint16_t port = derived_store_port(range, job, step);
      EXPECT_GE(port, range.low);
      EXPECT_LE(port, range.high);
      EXPECT_EQ(port, range.low + (first - range.low + step) % 100) << job << "." << step;
    }
  }
  EXPECT_EQ(derived_store_port(PortRange{5000, 5000}, 123, 45), 5000);
}

TEST(StoreAddress, ThePortRangeIsASetting) {
  EnvMap env = srun_task(0);
  env["CANOPY_STORE_PORT_RANGE"] = "31000-31009";
  const LaunchInfo info = parse_launch_environment(env);
  EXPECT_GE(info.store_port, 31000);
  EXPECT_LE(info.store_port, 31009);
  EXPECT_MENTIONS(info.store_origin, "31000-31009");
  for (const char* bad : {"31009-31000", "0-10", "1-65536", "31000", "31000-", "a-b", "1-2-3", "-5"}) {
    env["CANOPY_STORE_PORT_RANGE"] = bad;
    EXPECT_MENTIONS(config_error(env), "CANOPY_STORE_PORT_RANGE");
  }
}

TEST(StoreAddress, SlurmsReservedPortsComeFirst) {
  EnvMap env = srun_task(2);
  env["SLURM_STEP_RESV_PORTS"] = "12003-12004";
  EXPECT_EQ(parse_launch_environment(env).store_port, 12003);
  env["SLURM_STEP_RESV_PORTS"] = "12007";
  EXPECT_EQ(parse_launch_environment(env).store_port, 12007);
  env["SLURM_STEP_RESV_PORTS"] = "x-1";
  EXPECT_MENTIONS(config_error(env), "SLURM_STEP_RESV_PORTS");
}

TEST(StoreAddress, GivenAddressesPortsAndStoreDirectoriesKeepWinning) {
  EnvMap env = srun_task(1);
  env["MASTER_ADDR"] = "head";
  LaunchInfo info = parse_launch_environment(env);
  EXPECT_EQ(info.store_host, "head");
  EXPECT_EQ(info.store_port, 29500);
  env["CANOPY_MASTER_ADDR"] = "head2";
  env["MASTER_PORT"] = "1234";
  info = parse_launch_environment(env);
  EXPECT_EQ(info.store_host, "head2");
  EXPECT_EQ(info.store_port, 1234);

  EnvMap port_only = srun_task(1);
  port_only["CANOPY_MASTER_PORT"] = "4321";
  info = parse_launch_environment(port_only);
  EXPECT_EQ(info.store_host, "node01");
  EXPECT_EQ(info.store_port, 4321);

  EnvMap file = srun_task(1);
  file["CANOPY_STORE_FILE"] = "/shared/store";
  info = parse_launch_environment(file);
  EXPECT_EQ(info.store_file, "/shared/store");
  EXPECT_TRUE(info.store_host.empty());

  // canopy-run's own variables win over the srun that started it.
  EnvMap nested = srun_task(1);
  nested.insert({{"CANOPY_RANK", "3"},
                 {"CANOPY_WORLD_SIZE", "8"},
                 {"CANOPY_MASTER_ADDR", "10.0.0.1"},
                 {"CANOPY_MASTER_PORT", "29999"},
                 {"CANOPY_STORE_HOSTED", "1"}});
  info = parse_launch_environment(nested);
  EXPECT_EQ(info.source, "canopy");
  EXPECT_EQ(info.store_host, "10.0.0.1");
  EXPECT_EQ(info.store_port, 29999);
}

TEST(StoreAddress, SlurmRefusalsNameWhatToFix) {
  EnvMap no_lists = srun_task(1);
  no_lists.erase("SLURM_STEP_NODELIST");
  no_lists.erase("SLURM_JOB_NODELIST");
  EXPECT_MENTIONS(config_error(no_lists), "neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST");

  EnvMap bad_list = srun_task(1);
  bad_list["SLURM_STEP_NODELIST"] = "node[02-01]";
  EXPECT_MENTIONS(config_error(bad_list), "SLURM_STEP_NODELIST='node[02-01]' is not a SLURM hostlist");

  EnvMap elsewhere = srun_task(0);
  elsewhere["SLURMD_NODENAME"] = "node02";
  std::string message = config_error(elsewhere);
  EXPECT_MENTIONS(message, "rank 0 runs on SLURMD_NODENAME='node02'");
  EXPECT_MENTIONS(message, "MASTER_ADDR");

  // Found by fuzz/launch_environment_fuzzer: a node name with NUL bytes cut the message short before it
  // named the variable. Values from the environment are shown escaped.
  elsewhere["SLURMD_NODENAME"] = std::string("nod\0\0", 5);
  EXPECT_MENTIONS(config_error(elsewhere), "SLURMD_NODENAME='nod\\x00\\x00'");

  EnvMap no_job = srun_task(1);
  no_job.erase("SLURM_JOB_ID");
  EXPECT_MENTIONS(config_error(no_job), "SLURM_JOB_ID");

  EnvMap bad_step = srun_task(1);
  bad_step["SLURM_STEP_ID"] = "batch";
  EXPECT_MENTIONS(config_error(bad_step), "SLURM_STEP_ID='batch'");
}

EnvMap mpirun_rank(int rank, int size, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % local_size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_MCA_ess_base_jobid", "448856065"}};
}

TEST(StoreAddress, UnderMpirunOnOneHostLoopbackAndAPortFromTheJob) {
  const LaunchInfo zero = parse_launch_environment(mpirun_rank(0, 4, 4));
  EXPECT_EQ(zero.store_host, "127.0.0.1");
  EXPECT_FALSE(zero.store_through_pmix);
  EXPECT_MENTIONS(zero.store_origin, "OMPI_MCA_ess_base_jobid='448856065'");
  EXPECT_EQ(parse_launch_environment(mpirun_rank(3, 4, 4)).store_port, zero.store_port);
  EnvMap other_job = mpirun_rank(0, 4, 4);
  other_job["OMPI_MCA_ess_base_jobid"] = "448921601";
  EXPECT_NE(parse_launch_environment(other_job).store_port, zero.store_port);
  EnvMap no_job = mpirun_rank(0, 4, 4);
  no_job.erase("OMPI_MCA_ess_base_jobid");
  EXPECT_MENTIONS(config_error(no_job), "OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE");
  no_job["PMIX_NAMESPACE"] = "prterun-host-1234@1";  // Open MPI 5 names the job only this way
  EXPECT_EQ(parse_launch_environment(no_job).store_host, "127.0.0.1");
}

TEST(StoreAddress, UnderMpirunAcrossHostsPmixOrASayWhy) {
  EnvMap env = mpirun_rank(1, 4, 2);
  if (pmix_built()) {
    const LaunchInfo info = parse_launch_environment(env);
    EXPECT_TRUE(info.store_through_pmix);
    EXPECT_TRUE(info.store_host.empty());
    EXPECT_EQ(info.store_port, 0);  // rank 0 takes a free one
    env["CANOPY_MASTER_PORT"] = "4567";
    EXPECT_EQ(parse_launch_environment(env).store_port, 4567);
  } else {
    EXPECT_MENTIONS(config_error(env), "no PMIx (libpmix-dev)");
  }
  env["MASTER_ADDR"] = "head";
  EXPECT_FALSE(parse_launch_environment(env).store_through_pmix);
}

TEST(StoreAddress, OtherLaunchersStillNeedAnAddress) {
  std::string message = config_error({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_MENTIONS(message, "no store address");
  EXPECT_MENTIONS(message, "CANOPY_MASTER_ADDR or MASTER_ADDR");
  // A store some launcher hosts is never derived: only that launcher knows where it is.
  EnvMap hosted = srun_task(1);
  hosted["CANOPY_STORE_HOSTED"] = "1";
  EXPECT_MENTIONS(config_error(hosted), "no store address");
}

}  // namespace
}  // namespace canopy::rendezvous
