// canopy-run: starts the ranks of a Canopy job on this node, like torchrun --standalone / --nnodes.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <memory>

#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/console.hpp"
#include "launcher/descriptor_limit.hpp"
#include "launcher/job_store.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/node_rendezvous.hpp"
#include "launcher/node_watch.hpp"
#include "launcher/output_budget.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/rank_group.hpp"
#include "launcher/torch_port.hpp"

namespace canopy::launcher {
namespace {

// A rank's pipe must never become fd 1 or 2 of canopy-run itself: give closed standard descriptors a
// harmless /dev/null.
void open_missing_standard_fds() {
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF)
      ::open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
  }
}

// The first stop request (SIGINT, SIGTERM, SIGHUP) that arrived while no group was running, or 0.
int pending_stop_request(SignalWatch& signals) {
  for (int signal : signals.take()) {
    if (SignalWatch::is_stop_request(signal)) return signal;
  }
  return 0;
}

struct JobEnd {
  int exit_status = 0;
  bool stop_requested = false;  // by a signal to canopy-run
};

// Runs the group, and again after each failure while restarts are left. With --elastic the group runs
// once: its restarts are spent on replacements of single ranks, inside run_rank_group.
// `node_watch` and `node_admissions`: with --rdzv-backend etcd only (null and empty otherwise).
JobEnd run_attempts(const LaunchOptions& options, LaunchRound& round, SignalWatch& signals,
                    NodeWatch* node_watch, const JoinQuery& node_admissions) {
  const EnvMap base = current_environment();
  for (int attempt = 0;; ++attempt) {
    round.restart_count = attempt;
    std::vector<std::vector<std::string>> envps;
    for (int local = 0; local < options.nproc; ++local) {
      envps.push_back(to_envp_strings(rank_environment(base, options, round, local)));
    }
    ElasticHooks elastic;
    if (options.elastic) {
      elastic.replacement_env = [&](int local, int replacement) {
        LaunchRound replacing = round;
        replacing.restart_count = replacement;
        return to_envp_strings(rank_environment(base, options, replacing, local, RankStart::Replacement));
      };
      elastic.join_state = options.placement ? node_admissions : admissions_of_job(options, round);
    }
    if (node_watch != nullptr) elastic.job_news = [node_watch] { return node_watch->take(); };
    GroupOutcome outcome = run_rank_group(options, envps, signals, elastic);
    if (outcome.succeeded()) return {0, false};
    if (outcome.stop_signal != 0) return {128 + outcome.stop_signal, true};
    if (!outcome.launch_error.empty()) {
      report("{}", outcome.launch_error);
      return {outcome.launch_errno == ENOENT ? 127 : 126, false};  // a shell's "not found", "cannot run"
    }
    if (int signal = pending_stop_request(signals); signal != 0) return {128 + signal, true};
    if (!outcome.job_lost.empty()) return {1, false};
    if (options.elastic) return {outcome.first_failure->shell_status(), false};
    if (attempt < options.max_restarts) {
      report("restarting all ranks (restart {} of {})", attempt + 1, options.max_restarts);
      continue;
    }
    if (options.max_restarts > 0) {
      report("giving up after {} restart{}", options.max_restarts, options.max_restarts == 1 ? "" : "s");
    }
    return {outcome.first_failure->shell_status(), false};
  }
}

// Resolves --output from the descriptors canopy-run holds now (the store hosted already) and will need;
// says why when auto gives up the prefixes, warns when the store may not fit. Throws Error(Resource) when
// --output prefixed cannot fit its pipes, before any rank starts.
void resolve_output(LaunchOptions& options) {
  const DescriptorBudget budget =
      current_descriptor_budget(options.nproc, options.hosts_store() ? options.world_size() : 0,
                                options.hosts_store() ? options.nnodes - 1 : 0);
  OutputChoice choice = choose_output(options.output, budget);
  if (!choice.refusal.empty()) fail(ErrorCode::Resource, "{}", choice.refusal);
  log::info("{}", choice.summary);
  if (!choice.notice.empty()) report("{}", choice.notice);
  if (!choice.warning.empty()) report("{}", choice.warning);
  options.output = choice.prefixed ? OutputMode::Prefixed : OutputMode::Direct;
}

// The longest a count of the nodes or a read of the join tickets may take: etcd answers in milliseconds, and
// a store that cannot is only logged (the ranks go on).
constexpr auto kNodeStoreLimit = std::chrono::seconds(5);

// --rdzv-backend etcd: meets the other nodes (node_rendezvous.hpp) and places this one; its ranks' deaths
// are then judged among this node's ranks alone (1 of them keeps the node in), and the job's by the nodes
// left (node_watch.hpp).
std::unique_ptr<NodeRendezvous> meet_the_other_nodes(LaunchOptions& options, const LaunchRound& round,
                                                     SignalWatch& signals) {
  auto nodes = std::make_unique<NodeRendezvous>(options, round.job_token);
  options.placement = nodes->meet([&signals] { return pending_stop_request(signals); });
  options.elastic = ElasticRange{1, options.nproc};
  return nodes;
}

int launch(const LaunchOptions& given) {
  LaunchOptions options = given;
  raise_descriptor_limit();  // first: the store holds a socket per rank, and the ranks inherit it
  // Ignored rather than handled: a reader of our output that goes away must not take the ranks with it.
  ::signal(SIGPIPE, SIG_IGN);
  SignalWatch signals;  // before the store server's threads exist, so that they inherit the blocked mask

  LaunchRound round;
  round.launch_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  round.job_token = options.job_token ? *options.job_token : generate_job_token();
  round.master_port = options.master_port;
  round.stderr_is_terminal = ::isatty(STDERR_FILENO) == 1;
  std::unique_ptr<TcpStoreServer> store;
  std::unique_ptr<NodeRendezvous> nodes;
  std::unique_ptr<NodeWatch> node_watch;
  if (options.rdzv.elastic_nodes()) {
    try {
      nodes = meet_the_other_nodes(options, round, signals);
    } catch (const RendezvousStopped& stopped) {
      report("received SIG{} while meeting the other nodes; stopping", sigabbrev_np(stopped.signal));
      return 128 + stopped.signal;
    }
    node_watch = std::make_unique<NodeWatch>(nodes->another_handle(kNodeStoreLimit), options.rdzv.nodes);
  } else if (options.hosts_store()) {
    store = host_store(options, round.job_token);
    round.master_port = store->port();
  }
  round.torch_master_port = torch_master_port(options, round.master_port);
  resolve_output(options);

  const JoinQuery node_admissions = nodes ? admissions_in(nodes->another_handle(kNodeStoreLimit)) : JoinQuery();
  JobEnd end = run_attempts(options, round, signals, node_watch.get(), node_admissions);
  if (nodes) {
    if (end.exit_status == 0) nodes->mark_finished();
  } else if (options.nnodes > 1) {
    if (!options.hosts_store()) {
      report_node_finished(options, round);
    } else if (!end.stop_requested) {
      wait_for_other_nodes(options, round, signals, kOtherNodesLimit);
    }
  }
  return end.exit_status;
}

}  // namespace
}  // namespace canopy::launcher

int main(int argc, char** argv) {
  using namespace canopy::launcher;
  open_missing_standard_fds();
  try {
    ParsedCommandLine parsed = parse_command_line(argc, argv, canopy::current_environment());
    if (!parsed.options) {
      write_fully(parsed.exit_code == 0 ? STDOUT_FILENO : STDERR_FILENO, parsed.message);
      return parsed.exit_code;
    }
    return launch(*parsed.options);
  } catch (const std::exception& e) {
    report("{}", e.what());
    return 1;
  }
}
