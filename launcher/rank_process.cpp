#include "launcher/rank_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "common/error.hpp"

namespace canopy::launcher {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Closes the descriptors it owns unless released: spawning has several ways to fail half-way.
class Pipe {
 public:
  explicit Pipe(const char* what) {
    if (::pipe2(fds_, O_CLOEXEC) != 0) fail_errno(fmt::format("cannot create a pipe for {}", what));
  }
  ~Pipe() {
    close_read_end();
    close_write_end();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  int release_read_end() { return std::exchange(fds_[0], -1); }
  void close_read_end() { close_end(0); }
  void close_write_end() { close_end(1); }

 private:
  void close_end(int end) {
    if (fds_[end] >= 0) ::close(std::exchange(fds_[end], -1));
  }
  int fds_[2] = {-1, -1};
};

// Where execvp would find `name`: itself when it holds a '/', else the first executable file of that name
// in canopy-run's PATH (as posix_spawnp searches). Throws SpawnFailure as a shell would word it.
std::string find_program(const std::string& name) {
  auto executable = [](const std::string& path, int& error) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return false;
    if (S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0) return true;
    error = EACCES;  // there, but not something we may run
    return false;
  };
  int error = ENOENT;
  if (name.find('/') != std::string::npos) {
    if (executable(name, error)) return name;
    if (error == ENOENT && ::access(name.c_str(), F_OK) != 0) error = errno;
  } else {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/bin:/usr/bin";
    while (true) {
      std::size_t colon = dirs.find(':');
      std::string_view dir = dirs.substr(0, colon);
      std::string candidate = dir.empty() ? name : fmt::format("{}/{}", dir, name);  // "" is the cwd
      if (executable(candidate, error)) return candidate;
      if (colon == std::string_view::npos) break;
      dirs.remove_prefix(colon + 1);
    }
  }
  throw SpawnFailure{fmt::format("cannot run '{}': {}", name, std::strerror(error)), error};
}

// Everything the child needs, made before it starts: until it execs, the child runs on canopy-run's memory
// while canopy-run's other threads go on, so it may only make system calls (no allocation, no locks).
struct ChildPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdout_fd = -1;  // write ends of the output pipes; -1: inherit canopy-run's
  int stderr_fd = -1;
  bool bind = false;
  cpu_set_t cpus{};
  pid_t parent = -1;
  int report_fd = -1;  // gets the step and errno when the child fails before exec
  int open_max = 0;    // where close_range is missing, the descriptors below this are marked one by one
};

// What a child reports through ChildPlan::report_fd.
struct ChildFailure {
  enum Step : int { kParentGone, kSetup, kBind, kExec } step;
  int error;
};

// The child's code runs on a stack no sanitizer knows (kChildStackBytes), as a thread none has seen start,
// so it is left uninstrumented: ASan would warn that it cannot tell where that stack is.
#define CANOPY_CHILD_CODE __attribute__((no_sanitize("address", "thread")))

[[noreturn]] CANOPY_CHILD_CODE void child_fails(const ChildPlan& plan, ChildFailure::Step step) {
  ChildFailure failure{step, errno};
  [[maybe_unused]] ssize_t n = ::write(plan.report_fd, &failure, sizeof failure);
  ::_exit(127);
}

// Room for become_rank's frames, which hold no more than a few system calls' arguments.
constexpr std::size_t kChildStackBytes = 64 * 1024;

[[noreturn]] CANOPY_CHILD_CODE void become_rank(const ChildPlan& plan) {
  // The rank ends with canopy-run however it ends, SIGKILL included. If canopy-run died before the
  // request was made, the signal will never come: the parent check catches that.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fails(plan, ChildFailure::kSetup);
  if (::getppid() != plan.parent) child_fails(plan, ChildFailure::kParentGone);
  // The rank's own process group: a terminal's Ctrl-C reaches canopy-run only, which forwards it once, and
  // kill(-pgid) reaches whatever the rank started.
  if (::setpgid(0, 0) != 0) child_fails(plan, ChildFailure::kSetup);
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) child_fails(plan, ChildFailure::kSetup);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;  // canopy-run ignores SIGPIPE; the program should not inherit that
  if (::sigaction(SIGPIPE, &default_action, nullptr) != 0) child_fails(plan, ChildFailure::kSetup);
  // stdin from /dev/null: a rank outside the terminal's foreground group that read the terminal would be
  // stopped (SIGTTIN) and hang the job.
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0) child_fails(plan, ChildFailure::kSetup);
  if (null_fd != STDIN_FILENO) ::close(null_fd);
  if (plan.stdout_fd >= 0 && ::dup2(plan.stdout_fd, STDOUT_FILENO) < 0)
    child_fails(plan, ChildFailure::kSetup);
  if (plan.stderr_fd >= 0 && ::dup2(plan.stderr_fd, STDERR_FILENO) < 0)
    child_fails(plan, ChildFailure::kSetup);
  if (plan.bind && ::sched_setaffinity(0, sizeof plan.cpus, &plan.cpus) != 0)
    child_fails(plan, ChildFailure::kBind);
  // Descriptors the launcher did not mark close-on-exec (a library's socket) must not leak into the rank;
  // marked rather than closed, so that report_fd stays usable until the exec. close_range needs Linux 5.11.
  if (::syscall(SYS_close_range, STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = STDERR_FILENO + 1; fd < plan.open_max; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::execve(plan.path, plan.argv, plan.envp);
  child_fails(plan, ChildFailure::kExec);
}

CANOPY_CHILD_CODE int start_rank(void* plan) {
  become_rank(*static_cast<const ChildPlan*>(plan));
}

}  // namespace

RankProcess spawn_rank(const std::vector<std::string>& command, const std::vector<std::string>& envp,
                       bool capture_output, int cpu) {
  if (command.empty()) throw SpawnFailure{"cannot run an empty command", EINVAL};
  const std::string path = find_program(command[0]);
  std::vector<char*> argv = c_strings(command);
  std::vector<char*> env = c_strings(envp);
  std::optional<Pipe> out_pipe, err_pipe;
  if (capture_output) {
    out_pipe.emplace("a rank's output");
    err_pipe.emplace("a rank's output");
  }
  Pipe report("a rank's start");

  ChildPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = env.data();
  plan.stdout_fd = out_pipe ? out_pipe->write_end() : -1;
  plan.stderr_fd = err_pipe ? err_pipe->write_end() : -1;
  plan.bind = cpu >= 0;
  CPU_ZERO(&plan.cpus);
  if (plan.bind) CPU_SET(cpu, &plan.cpus);
  plan.parent = ::getpid();
  plan.report_fd = report.write_end();
  plan.open_max = static_cast<int>(std::clamp<long>(::sysconf(_SC_OPEN_MAX), 1024, 1 << 16));

  // The child shares this process's memory until it execs, and this thread waits until it has (vfork's
  // contract, on a stack of its own): unlike fork(), nothing of canopy-run's memory is copied, and no page
  // canopy-run writes afterwards faults to be copied, which at 512 ranks was most of the launch.
  std::vector<std::byte> child_stack(kChildStackBytes);
  const pid_t pid =
      ::clone(start_rank, child_stack.data() + child_stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  if (pid < 0) fail_errno("cannot start a rank's process");
  // Also here, so that a stop signal sent before the child got to it still reaches its group.
  ::setpgid(pid, pid);
  report.close_write_end();
  ChildFailure failure{};
  ssize_t n = 0;
  do {
    n = ::read(report.read_end(), &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {  // the child failed before or at exec; an end of file means it exec'd
    ::waitpid(pid, nullptr, 0);
    switch (failure.step) {
      case ChildFailure::kExec:
        throw SpawnFailure{fmt::format("cannot run '{}': {}", command[0], std::strerror(failure.error)),
                           failure.error};
      case ChildFailure::kBind:
        fail_errno(fmt::format("cannot bind a rank to CPU {}", cpu), failure.error);
      case ChildFailure::kParentGone:
        fail(ErrorCode::System, "a rank's parent changed before it could start");
      case ChildFailure::kSetup:
        break;
    }
    fail_errno("cannot prepare a rank's start", failure.error);
  }

  RankProcess process;
  process.pid = pid;
  if (capture_output) {
    process.stdout_fd = out_pipe->release_read_end();
    process.stderr_fd = err_pipe->release_read_end();
    for (int fd : {process.stdout_fd, process.stderr_fd}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return process;
}

RankExit RankExit::from_wait_status(int rank, pid_t pid, int wait_status) {
  RankExit exit{rank, pid, 0, 0};
  if (WIFEXITED(wait_status)) exit.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) exit.signal = WTERMSIG(wait_status);
  return exit;
}

std::string RankExit::describe() const {
  if (signal != 0) {
    return fmt::format("rank {} (pid {}) was killed by signal {} ({})", rank, pid, signal, strsignal(signal));
  }
  return fmt::format("rank {} (pid {}) exited with status {}", rank, pid, exit_code);
}

SignalWatch::SignalWatch() {
  sigemptyset(&watched_);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&watched_, s);
  if (int err = pthread_sigmask(SIG_BLOCK, &watched_, &previous_mask_); err != 0) {
    fail_errno("cannot block signals for the launcher", err);
  }
  fd_ = signalfd(-1, &watched_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    fail_errno("cannot create a signalfd for the launcher", err);
  }
}

SignalWatch::~SignalWatch() {
  ::close(fd_);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

std::vector<int> SignalWatch::take() {
  std::vector<int> signals;
  signalfd_siginfo info{};
  while (true) {
    ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return signals;  // EAGAIN: nothing more pending
  }
}

int cpu_for_local_rank(int local_rank, const std::vector<int>& allowed) {
  return allowed[static_cast<std::size_t>(local_rank) % allowed.size()];
}

}  // namespace canopy::launcher
