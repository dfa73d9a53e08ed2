#include "launcher/rank_group.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "common/cpu_list.hpp"
#include "common/deadline.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/console.hpp"
#include "launcher/elastic_policy.hpp"
#include "launcher/rank_process.hpp"

namespace canopy::launcher {
namespace {

using std::chrono::seconds;

// The loop wakes at least this often, so that a lost wake-up can only delay, never hang.
constexpr auto kHeartbeat = seconds(1);
// How long, once every rank has exited, something they started may keep their output pipes open.
constexpr auto kOutputDrainLimit = seconds(2);
// How long after SIGKILL a process may stay (stuck in the kernel) before canopy-run stops waiting for it.
constexpr auto kKillLimit = seconds(10);
// Reads of one pipe when its rank has exited: its writes are all there, at most a pipe's capacity.
constexpr int kDrainReads = 32;

// One captured output of a rank (its stdout or its stderr) and where its lines go.
struct OutputStream {
  int fd = -1;
  int sink = -1;
  int id = -1;  // names the stream to the status line
  LinePrefixer prefixer;
  OutputStream(int from, int to, int rank)
      : fd(from),
        sink(to),
        id(2 * rank + (to == STDERR_FILENO ? 1 : 0)),
        prefixer(fmt::format("[{}] ", rank)) {}
};

struct Rank {
  int rank = -1;
  int local = -1;  // its slot on this node: a replacement takes the dead rank's
  pid_t pid = -1;
  bool running = true;
  bool replacement = false;  // --elastic: started in a dead rank's slot, to join the running group
  bool admitted = false;     // a replacement the group has admitted (once known: it stays so)
  std::vector<OutputStream> outputs;
};

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, SignalWatch& signals, const ElasticHooks& elastic)
      : options_(options), signals_(signals), elastic_(elastic) {}
  ~Supervisor() { abandon(); }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  GroupOutcome run(const std::vector<std::vector<std::string>>& rank_envps) {
    start(rank_envps);
    supervise();
    return outcome_;
  }

 private:
  void start(const std::vector<std::vector<std::string>>& rank_envps) {
    if (options_.bind_to_core && rank_envps.size() > cpus_.size())
      log::warn("canopy-run: {} ranks, {} CPUs: --bind-to core puts several ranks on one CPU",
                rank_envps.size(), cpus_.size());
    for (int local = 0; local < static_cast<int>(rank_envps.size()); ++local) {
      if (!spawn_in_slot(local, rank_envps[local])) return;
      // A node that joins a running job (--rdzv-backend etcd) starts every rank as a newcomer.
      ranks_.back().replacement = options_.placement && options_.placement->joins;
    }
  }

  // Starts a rank in local slot `local`; false (the group stopping) when the program cannot be started.
  bool spawn_in_slot(int local, const std::vector<std::string>& envp) {
    const int rank = options_.global_rank(local);
    try {
      const int cpu = options_.bind_to_core ? cpu_for_local_rank(local, cpus_) : -1;
      if (cpu >= 0) log::info("canopy-run: binding rank {} to CPU {}", rank, cpu);
      RankProcess process = spawn_rank(options_.command, envp, options_.output != OutputMode::Direct, cpu);
      Rank& r = ranks_.emplace_back();
      r.rank = rank;
      r.local = local;
      r.pid = process.pid;
      if (process.stdout_fd >= 0) r.outputs.emplace_back(process.stdout_fd, STDOUT_FILENO, rank);
      if (process.stderr_fd >= 0) r.outputs.emplace_back(process.stderr_fd, STDERR_FILENO, rank);
      log::info("canopy-run: started rank {} (local rank {}) as pid {}", rank, local, process.pid);
      return true;
    } catch (const SpawnFailure& e) {
      outcome_.launch_error = e.what();
      outcome_.launch_errno = e.error();
      begin_stop(SIGTERM);  // the ranks already started would wait for this one forever
      return false;
    }
  }

  void supervise() {
    std::optional<Deadline> drain_until;
    while (true) {
      if (running_count() == 0) {
        if (!drain_until) drain_until = Deadline::after(kOutputDrainLimit);
        if (open_output_count() == 0 || drain_until->expired()) break;
      }
      if (kill_at_ && kill_at_->expired() && !give_up_at_) kill_now();
      if (give_up_at_ && give_up_at_->expired() && running_count() > 0) {
        status_.erase();
        for (Rank& r : ranks_) {
          if (!r.running) continue;
          report("rank {} (pid {}) did not end after SIGKILL; no longer waiting for it", r.rank, r.pid);
          r.running = false;
        }
        break;
      }
      wait_and_handle_events(next_wake(drain_until));
      reap_exited();
      stop_replacements_nobody_can_admit();
      follow_the_other_nodes();
    }
    for (Rank& r : ranks_) {
      for (OutputStream& s : r.outputs) close_stream(s);
    }
    status_.erase();
  }

  Deadline next_wake(const std::optional<Deadline>& drain_until) const {
    Deadline wake = Deadline::after(kHeartbeat);
    for (const auto& d : {kill_at_, give_up_at_, drain_until}) {
      if (d) wake = wake.earlier(*d);
    }
    return wake;
  }

  void wait_and_handle_events(Deadline wake) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<OutputStream*> streams{nullptr};
    for (Rank& r : ranks_) {
      for (OutputStream& s : r.outputs) {
        if (s.fd < 0) continue;
        fds.push_back({s.fd, POLLIN, 0});
        streams.push_back(&s);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), wake.poll_timeout_ms());
    if (ready < 0 && errno != EINTR) fail_errno("poll() on the ranks' output failed");
    if (ready <= 0) return;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_some(*streams[i]);
    }
    if (fds[0].revents != 0) {
      for (int signal : signals_.take()) {
        if (SignalWatch::is_stop_request(signal)) on_stop_request(signal);
      }
    }
  }

  // Reads what one pipe holds now; false once nothing more will come from it now.
  bool read_some(OutputStream& stream) {
    if (stream.fd < 0) return false;
    std::array<char, 65536> buffer;
    ssize_t n = ::read(stream.fd, buffer.data(), buffer.size());
    if (n > 0) {
      std::string lines;
      stream.prefixer.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), lines);
      status_.write_lines(stream.sink, lines);
      status_.show(stream.id, stream.sink, stream.prefixer.transient_line());
      return true;
    }
    if (n < 0 && (errno == EINTR)) return true;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    close_stream(stream);  // EOF, or an error that will not go away
    return false;
  }

  void close_stream(OutputStream& stream) {
    if (stream.fd < 0) return;
    std::string tail;
    stream.prefixer.finish(tail);
    status_.show(stream.id, stream.sink, "");
    status_.write_lines(stream.sink, tail);
    ::close(stream.fd);
    stream.fd = -1;
  }

  void reap_exited() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      pid_t got = ::waitpid(r.pid, &status, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      r.running = false;
      if (got < 0) {
        report("rank {} (pid {}) cannot be waited for: {}", r.rank, r.pid, std::strerror(errno));
        continue;
      }
      // Its last lines come before the news of its end.
      for (OutputStream& s : r.outputs) {
        for (int i = 0; i < kDrainReads && read_some(s); ++i) {
        }
      }
      const RankExit exit = RankExit::from_wait_status(r.rank, r.pid, status);
      if (exit.failed()) last_death_ = exit;
      on_rank_exit(exit, r.local);
    }
    start_replacements();  // after the loop: starting one adds to ranks_
  }

  void on_rank_exit(const RankExit& exit, int local) {
    status_.erase();  // canopy-run's own messages start on a line of their own
    if (!exit.failed()) {
      log::info("canopy-run: rank {} (pid {}) finished", exit.rank, exit.pid);
      ++finished_;
      return;
    }
    if (stopping_) {
      log::info("canopy-run: {} while the group was stopping", exit.describe());
      return;
    }
    report("{}", exit.describe());
    if (options_.elastic) {
      on_elastic_death(exit, local);
      return;
    }
    outcome_.first_failure = exit;
    if (running_count() > 0) report("stopping the other ranks");
    begin_stop(SIGTERM);
  }

  // --elastic: the others go on; the dead rank is replaced, or not, or the job is over.
  void on_elastic_death(const RankExit& exit, int local) {
    const GroupCount group{running_count() + static_cast<int>(replace_slots_.size()), finished_,
                           outcome_.replacements_started};
    const DeathVerdict verdict = after_death(*options_.elastic, options_.max_restarts, group, range_label());
    switch (verdict.action) {
      case AfterDeath::Replace:
        replace_slots_.push_back(local);
        ++outcome_.replacements_started;  // now, so that a second death in this reap sees it spent
        return;
      case AfterDeath::GoOn:
        report("rank {} is not replaced: {}", exit.rank, verdict.why);
        return;
      case AfterDeath::StopTheJob:
        report("{}{}", verdict.why, running_count() > 0 ? ": stopping the other ranks" : "");
        outcome_.first_failure = exit;
        begin_stop(SIGTERM);
        return;
    }
  }

  // How canopy-run's messages name the range a death is judged by.
  std::string range_label() const {
    if (!options_.placement) return fmt::format("--elastic {}", options_.elastic->text());
    return fmt::format("this node's {} (--nnodes {})", options_.elastic->text(), options_.rdzv.nodes.text());
  }

  void start_replacements() {
    std::vector<int> slots = std::move(replace_slots_);
    replace_slots_.clear();
    const int first = outcome_.replacements_started - static_cast<int>(slots.size()) + 1;
    for (std::size_t i = 0; i < slots.size() && !stopping_; ++i) {
      const int number = first + static_cast<int>(i);
      if (!spawn_in_slot(slots[i], elastic_.replacement_env(slots[i], number))) return;
      Rank& started = ranks_.back();
      started.replacement = true;
      report("replaced rank {} with pid {} (replacement {} of --max-restarts {}); it joins the running group",
             started.rank, started.pid, number, options_.max_restarts);
    }
  }

  // --elastic: once no member of the group is left (every rank still running is a replacement waiting
  // in join() for a ticket the group never admitted), nobody will grow to admit them: stop them rather
  // than let each wait out its CANOPY_TIMEOUT. Where the members finished, the job succeeded; where they
  // all died, it failed with the last death. A replacement with no ticket is left alone: it may join
  // some other way, or be about to take one.
  void stop_replacements_nobody_can_admit() {
    if (options_.placement) return stop_newcomers_the_finished_job_never_admitted();
    if (!options_.elastic || !elastic_.join_state || stopping_) return;
    std::vector<const Rank*> waiting;
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      if (!r.replacement || r.admitted) return;  // a member is left
      const JoinState state = elastic_.join_state(r.pid);
      r.admitted = state == JoinState::Admitted;
      if (state != JoinState::Waiting) return;
      waiting.push_back(&r);
    }
    if (waiting.empty()) return;
    status_.erase();
    std::string who;
    for (const Rank* r : waiting)
      who += fmt::format("{}rank {} (pid {})", who.empty() ? "" : ", ", r->rank, r->pid);
    if (finished_ > 0) {
      report("the group has finished without admitting the replacement{} waiting to join: stopping {}",
             waiting.size() == 1 ? "" : "s", who);
    } else {
      report("no member of the group is left to admit the replacement{} waiting to join: stopping {}",
             waiting.size() == 1 ? "" : "s", who);
      outcome_.first_failure = last_death_;
    }
    begin_stop(SIGTERM);
  }

  // --rdzv-backend etcd: the members are on other nodes, so a newcomer here (the ranks of a node that
  // joined, a replacement) is stopped only once the job has finished elsewhere while every rank still
  // running here waits in join() for a grow that will not come. Asked at most once a second: each answer
  // reads the join tickets in etcd.
  void stop_newcomers_the_finished_job_never_admitted() {
    if (!job_finished_ || !elastic_.join_state || stopping_) return;
    if (next_admission_check_ && !next_admission_check_->expired()) return;
    next_admission_check_ = Deadline::after(kHeartbeat);
    std::string who;
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      if (!r.replacement || r.admitted) return;  // a member here: it ends with the job
      const JoinState state = elastic_.join_state(r.pid);
      r.admitted = state == JoinState::Admitted;
      if (state != JoinState::Waiting) return;
      who += fmt::format("{}rank {} (pid {})", who.empty() ? "" : ", ", r.rank, r.pid);
    }
    if (who.empty()) return;
    status_.erase();
    report("the job has finished on the other nodes without admitting this node's ranks waiting to join: "
           "stopping {}",
           who);
    begin_stop(SIGTERM);
  }

  // --rdzv-backend etcd: a lost node only gets a line (the ranks shrink by themselves); too few nodes left
  // stops this node's ranks.
  void follow_the_other_nodes() {
    if (!elastic_.job_news) return;
    JobNews news = elastic_.job_news();
    job_finished_ = job_finished_ || news.job_finished;
    if (news.lines.empty() && news.stop_because.empty()) return;
    status_.erase();
    for (const std::string& line : news.lines) report("{}", line);
    if (news.stop_because.empty() || stopping_) return;
    report("{}", news.stop_because);
    outcome_.job_lost = news.stop_because;
    begin_stop(SIGTERM);
  }

  void on_stop_request(int signal) {
    status_.erase();
    if (outcome_.stop_signal == 0) {
      outcome_.stop_signal = signal;
      report("received SIG{} ({}), stopping the ranks", sigabbrev_np(signal), strsignal(signal));
      if (stopping_) {
        signal_running(signal);
      } else {
        begin_stop(signal);
      }
      return;
    }
    if (!give_up_at_) {
      report("received SIG{} again, killing the ranks", sigabbrev_np(signal));
      kill_now();
    }
  }

  void begin_stop(int signal) {
    stopping_ = true;
    signal_running(signal);
    kill_at_ = Deadline::after(options_.stop_grace);
  }

  void kill_now() {
    stopping_ = true;
    for (const Rank& r : ranks_) {
      if (r.running) log::info("canopy-run: sending SIGKILL to rank {} (pid {})", r.rank, r.pid);
    }
    signal_running(SIGKILL);
    give_up_at_ = Deadline::after(kKillLimit);
  }

  // The rank's whole process group, so that what it started ends with it.
  void signal_running(int signal) {
    for (const Rank& r : ranks_) {
      if (r.running && ::kill(-r.pid, signal) != 0) ::kill(r.pid, signal);
    }
  }

  int running_count() const {
    int n = 0;
    for (const Rank& r : ranks_) n += r.running ? 1 : 0;
    return n;
  }

  int open_output_count() const {
    int n = 0;
    for (const Rank& r : ranks_) {
      for (const OutputStream& s : r.outputs) n += s.fd >= 0 ? 1 : 0;
    }
    return n;
  }

  // Only after an exception: nothing may outlive canopy-run, so kill and reap without grace.
  void abandon() noexcept {
    signal_running(SIGKILL);
    Deadline limit = Deadline::after(kKillLimit);
    for (Rank& r : ranks_) {
      while (r.running && !limit.expired()) {
        int status = 0;
        pid_t got = ::waitpid(r.pid, &status, WNOHANG);
        if (got == r.pid || (got < 0 && errno != EINTR)) {
          r.running = false;
        } else {
          ::usleep(10'000);
        }
      }
      for (OutputStream& s : r.outputs) {
        if (s.fd >= 0) ::close(s.fd);
        s.fd = -1;
      }
    }
  }

  const LaunchOptions& options_;
  SignalWatch& signals_;
  const ElasticHooks& elastic_;
  const std::vector<int> cpus_ = allowed_cpus();
  std::vector<Rank> ranks_;  // every rank started, replacements after the ranks they replaced
  int finished_ = 0;         // ranks that exited 0
  std::optional<RankExit> last_death_;
  std::vector<int> replace_slots_;  // --elastic: slots whose rank died in this reap, to start again
  // A rank's progress line ("\r" without a newline), drawn below the output when the sink is a terminal.
  StatusLine status_{[](int fd) { return ::isatty(fd) == 1; }};
  GroupOutcome outcome_;
  bool stopping_ = false;
  std::optional<Deadline> kill_at_;     // SIGKILL then
  std::optional<Deadline> give_up_at_;  // stop waiting for ranks that ignore SIGKILL then
  bool job_finished_ = false;           // --rdzv-backend etcd: a node's ranks have all finished
  std::optional<Deadline> next_admission_check_;
};

}  // namespace

GroupOutcome run_rank_group(const LaunchOptions& options,
                            const std::vector<std::vector<std::string>>& rank_envps, SignalWatch& signals,
                            const ElasticHooks& elastic) {
  Supervisor supervisor(options, signals, elastic);
  return supervisor.run(rank_envps);
}

}  // namespace canopy::launcher
