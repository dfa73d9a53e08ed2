#include "launcher/rank_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

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
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) fail_errno("cannot create a pipe for a rank's output");
  }
  ~Pipe() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  int release_read_end() {
    int fd = fds_[0];
    fds_[0] = -1;
    return fd;
  }

 private:
  int fds_[2] = {-1, -1};
};

// posix_spawn's attribute objects, destroyed on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attributes{};
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

void check(int err, const char* what) {
  if (err != 0) fail_errno(fmt::format("cannot prepare a rank's start ({})", what), err);
}

}  // namespace

RankProcess spawn_rank(const std::vector<std::string>& command, const std::vector<std::string>& envp,
                       bool capture_output) {
  if (command.empty()) throw SpawnFailure{"cannot run an empty command", EINVAL};
  SpawnSetup setup;
  // The rank's own process group: a terminal's Ctrl-C reaches canopy-run only, which forwards it once,
  // and kill(-pgid) reaches whatever the rank started.
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  check(posix_spawnattr_setflags(&setup.attributes, flags), "flags");
  check(posix_spawnattr_setpgroup(&setup.attributes, 0), "process group");
  sigset_t none;
  sigemptyset(&none);
  check(posix_spawnattr_setsigmask(&setup.attributes, &none), "signal mask");
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // canopy-run ignores SIGPIPE; the program should not inherit that
  check(posix_spawnattr_setsigdefault(&setup.attributes, &defaults), "signal defaults");

  // stdin from /dev/null: a rank outside the terminal's foreground group that read the terminal would be
  // stopped (SIGTTIN) and hang the job.
  check(posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0), "stdin");
  std::optional<Pipe> out_pipe, err_pipe;
  if (capture_output) {
    out_pipe.emplace();
    err_pipe.emplace();
    check(posix_spawn_file_actions_adddup2(&setup.actions, out_pipe->write_end(), STDOUT_FILENO), "stdout");
    check(posix_spawn_file_actions_adddup2(&setup.actions, err_pipe->write_end(), STDERR_FILENO), "stderr");
  }
  // Descriptors the launcher did not mark close-on-exec (a library's socket) must not leak into the rank.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  check(posix_spawn_file_actions_addclosefrom_np(&setup.actions, STDERR_FILENO + 1), "closefrom");
#endif

  std::vector<char*> argv = c_strings(command);
  std::vector<char*> env = c_strings(envp);
  pid_t pid = -1;
  int err = posix_spawnp(&pid, argv[0], &setup.actions, &setup.attributes, argv.data(), env.data());
  if (err != 0) throw SpawnFailure{fmt::format("cannot run '{}': {}", command[0], std::strerror(err)), err};

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

BindCallingThread::BindCallingThread(int cpu) {
  if (::sched_getaffinity(0, sizeof(previous_), &previous_) != 0) fail_errno("sched_getaffinity");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (::sched_setaffinity(0, sizeof(one), &one) != 0)
    fail_errno(fmt::format("cannot bind a rank to CPU {}", cpu));
}

BindCallingThread::~BindCallingThread() {
  ::sched_setaffinity(0, sizeof(previous_), &previous_);
}

}  // namespace canopy::launcher
