#include "collectives/selection/choice_memo.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "common/fnv1a.hpp"
#include "common/log.hpp"

namespace canopy::collectives {

namespace {

// A file's first bytes: what it is and the version of its layout (magic, then inputs, then the answer).
constexpr std::string_view kMagic = "canopy choice memo 1\n";

// What a file holds before its answer: the magic line, the inputs' length, the inputs.
std::string header_of(std::string_view inputs) {
  return fmt::format("{}{}\n{}", kMagic, inputs.size(), inputs);
}

// An open file, closed (and its lock released) on every path out.
struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_all(int fd, std::string& out) {
  struct stat facts {};
  if (::fstat(fd, &facts) != 0) return false;
  out.resize(static_cast<std::size_t>(facts.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Takes the file's lock (`how`: LOCK_SH or LOCK_EX), waiting with growing pauses up to `patience`: a plain
// blocking flock would wait for ever behind a process stopped while it held it.
bool lock_within(int fd, int how, std::chrono::milliseconds patience) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  std::chrono::microseconds pause{200};
  while (::flock(fd, how | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds{10'000});
  }
  return true;
}

}  // namespace

ChoiceMemo::ChoiceMemo(std::filesystem::path directory, std::chrono::milliseconds patience)
    : directory_(std::move(directory)), patience_(patience) {}

std::shared_ptr<ChoiceMemo> ChoiceMemo::for_group(int size, int local_size) {
  if (size < kFromRanks || local_size < 2) return nullptr;
  return std::make_shared<ChoiceMemo>(fmt::format("/dev/shm/canopy-choices-{}", ::getuid()));
}

std::string ChoiceMemo::recall(std::string_view inputs, const std::function<std::string()>& compute) {
  std::error_code ignored;
  std::filesystem::create_directories(directory_, ignored);
  const std::filesystem::path path = directory_ / fmt::format("{:016x}", fnv1a64(inputs));
  OpenFile file{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
  std::string content;
  const std::string header = header_of(inputs);
  auto answered = [&] {
    return read_all(file.fd, content) && content.size() > header.size() && content.starts_with(header);
  };
  // Most of a host's ranks ask once the first has written the answer: they read it at once, under a shared
  // lock, rather than one by one under the exclusive lock the first holds while it computes (at 512 ranks
  // on 2 cores, their turns and pauses took a sixth of each rank's CPU). Without an answer, the
  // shared lock becomes the exclusive one, and the file is read again: another may have written it.
  const bool locked = file.fd >= 0 && lock_within(file.fd, LOCK_SH, patience_);
  if (locked && answered()) {
    ++recalled_;
    return content.substr(header.size());
  }
  if (!locked || !lock_within(file.fd, LOCK_EX, patience_)) {
    log::debug("choice memo: {} unusable ({}); computing here", path.string(), file.fd < 0 ? "open" : "lock");
    ++computed_;
    return compute();
  }
  if (answered()) {
    ++recalled_;
    return content.substr(header.size());
  }
  // Empty (the first to ask), cut short, or another input of the same digest (left alone).
  if (!content.empty() && content.starts_with(kMagic) && !content.starts_with(header)) {
    ++computed_;
    return compute();
  }
  return compute_and_offer(file.fd, inputs, compute);
}

std::string ChoiceMemo::compute_and_offer(int fd, std::string_view inputs,
                                          const std::function<std::string()>& compute) {
  ++computed_;
  std::string answer = compute();
  const std::string content = header_of(inputs) + answer;
  // A file cut short by a full /dev/shm would only be ignored, but an empty one says "not yet" plainly.
  if (::ftruncate(fd, 0) != 0 || !write_all(fd, content)) {
    log::debug("choice memo: cannot write ({}); the others compute their own", std::strerror(errno));
    (void)::ftruncate(fd, 0);
  }
  forget_old_files();
  return answer;
}

void ChoiceMemo::forget_old_files() {
  std::error_code error;
  std::size_t files = 0;
  for (auto it = std::filesystem::directory_iterator(directory_, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error))
    ++files;
  if (error || files <= kMaxFiles) return;
  const auto cutoff = std::filesystem::file_time_type::clock::now() - kRetention;
  for (auto it = std::filesystem::directory_iterator(directory_, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    std::error_code ignored;
    if (it->last_write_time(ignored) < cutoff) std::filesystem::remove(it->path(), ignored);
  }
}

}  // namespace canopy::collectives
