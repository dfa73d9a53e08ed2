// A Store in a directory that every rank sees (NFS, Lustre, a local disk for one host). One file per
// key, written to a temporary name and renamed into place, so a reader sees a whole value or none.
// add and compare_set take a per-key lock file made with O_CREAT|O_EXCL, which works across hosts on
// NFSv3+ without fcntl locks or inotify. Readers poll with a backoff from 1 ms to 50 ms.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "canopy/store.hpp"
#include "common/deadline.hpp"
#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/log.hpp"
#include "rendezvous/key_value_table.hpp"
#include "rendezvous/printable.hpp"
#include "rendezvous/store_wait.hpp"

namespace canopy {
namespace {

using rendezvous::printable;

constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kMaxPoll = std::chrono::milliseconds(50);
constexpr auto kFirstLockRetry = std::chrono::microseconds(100);
constexpr auto kMaxLockRetry = std::chrono::milliseconds(5);
// A lock is held for a read and a rename, microseconds; one this old belongs to a process that died
// holding it.
constexpr auto kStaleLockAge = std::chrono::seconds(60);
// File names stay under NAME_MAX (255) with room for the temporary-file suffix.
constexpr std::size_t kMaxEncodedName = 180;

// Bytes outside [A-Za-z0-9._-] become %XX, so any key is one safe file name component.
std::string encode_key(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (out.size() <= kMaxEncodedName) return out;
  // Too long for a file name: a readable head and 128 bits of hash of the whole key. Two FNV-1a
  // variants are not cryptographic, but keys are chosen by the job, not by an adversary.
  std::uint64_t h1 = 14695981039346656037ull, h2 = 0x6c62272e07bb0142ull;
  for (unsigned char c : key) {
    h1 = (h1 ^ c) * 1099511628211ull;
    h2 = (h2 ^ c ^ 0x5a) * 0x100000001b3ull;
    h2 ^= h2 >> 29;
  }
  return fmt::format("{}~{:016x}{:016x}", out.substr(0, 100), h1, h2);
}

// Unique across the processes and hosts sharing the directory: pid alone is not.
std::string unique_suffix() {
  static const std::uint64_t process_nonce = [] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("{:x}.{:x}.{:x}", process_nonce, static_cast<unsigned>(::getpid()), counter++);
}

// Sleeps before the next poll and lengthens the pause; false when the deadline has passed.
template <typename Pause>
bool pause_before_retry(Deadline deadline, Pause& pause, Pause longest) {
  if (deadline.expired()) return false;
  std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline.remaining()));
  pause = std::min(pause * 2, longest);
  return true;
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {}

  void set(std::string_view key, std::string_view value) override { write_atomically(key, value); }

  std::string get(std::string_view key, Duration timeout) override {
    auto deadline = Deadline::after(rendezvous::clamp_store_wait(timeout));
    auto pause = Duration(kFirstPoll);
    for (;;) {
      if (auto value = read_value(key)) return *value;
      if (!pause_before_retry(deadline, pause, Duration(kMaxPoll)))
        fail(ErrorCode::Timeout,
             "get({}) on the FileStore in {} timed out after {} ms: the key was never set", printable(key),
             directory_, rendezvous::clamp_store_wait(timeout).count());
    }
  }

  std::int64_t add(std::string_view key, std::int64_t delta) override {
    auto lock = lock_key(key, "add");
    auto current = read_value(key);
    std::int64_t sum = rendezvous::add_to_counter(key, current ? *current : std::string(), delta);
    write_atomically(key, std::to_string(sum));
    return sum;
  }

  // Calls hold no lock between them: a second handle only needs its own timeout.
  std::shared_ptr<Store> open_another(Duration timeout) override {
    auto another = std::make_shared<FileStore>(directory_);
    another->set_timeout(timeout);
    return another;
  }

  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired) override {
    auto lock = lock_key(key, "compare_set");
    auto current = read_value(key);
    bool matches = current ? *current == expected : expected.empty();
    if (!matches) return current ? *current : std::string();
    write_atomically(key, desired);
    return std::string(desired);
  }

  bool check(const std::vector<std::string>& keys) override {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& key) { return exists(key); });
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    auto deadline = Deadline::after(rendezvous::clamp_store_wait(timeout));
    auto pause = Duration(kFirstPoll);
    std::size_t ready = 0;  // keys before this one exist: a key once set is not looked at again
    for (;;) {
      while (ready < keys.size() && exists(keys[ready])) ++ready;
      if (ready == keys.size()) return;
      if (!pause_before_retry(deadline, pause, Duration(kMaxPoll))) {
        std::vector<std::string> missing;
        for (std::size_t i = ready; i < keys.size(); ++i)
          if (!exists(keys[i])) missing.push_back(keys[i]);
        fail(ErrorCode::Timeout, "wait() on the FileStore in {} timed out after {} ms; still missing: {}",
             directory_, rendezvous::clamp_store_wait(timeout).count(), rendezvous::printable_list(missing));
      }
    }
  }

  // A poll until every key exists, then one read per key; a key removed in between is waited for again,
  // within the same deadline.
  std::vector<std::string> get_many(const std::vector<std::string>& keys, Duration timeout) override {
    auto deadline = Deadline::after(rendezvous::clamp_store_wait(timeout));
    wait(keys, timeout);
    std::vector<std::string> values;
    values.reserve(keys.size());
    for (const auto& key : keys) {
      if (auto value = read_value(key)) {
        values.push_back(std::move(*value));
      } else {
        values.push_back(get(key, std::chrono::duration_cast<Duration>(deadline.remaining())));
      }
    }
    return values;
  }

  bool remove(std::string_view key) override {
    std::string path = value_path(key);
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    fail_errno(fmt::format("remove({}) on the FileStore: unlink('{}')", printable(key), path));
  }

 private:
  // Holds a key's lock file until destroyed.
  class KeyLock {
   public:
    explicit KeyLock(std::string path) : path_(std::move(path)) {}
    KeyLock(KeyLock&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
    KeyLock& operator=(KeyLock&&) = delete;
    ~KeyLock() {
      if (!path_.empty()) ::unlink(path_.c_str());
    }

   private:
    std::string path_;
  };

  std::string value_path(std::string_view key) const { return directory_ + "/k." + encode_key(key); }
  std::string lock_path(std::string_view key) const { return directory_ + "/l." + encode_key(key); }

  bool exists(std::string_view key) const {
    struct stat info {};
    return ::stat(value_path(key).c_str(), &info) == 0;
  }

  std::optional<std::string> read_value(std::string_view key) const {
    std::string path = value_path(key);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) return std::nullopt;
      fail_descriptor_call(fmt::format("FileStore: open('{}') for key {}", path, printable(key)), err);
    }
    std::string value;
    char buffer[64 * 1024];
    for (;;) {
      ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n > 0) {
        value.append(buffer, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) break;
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail_errno(fmt::format("FileStore: read('{}') for key {}", path, printable(key)), err);
    }
    ::close(fd);
    return value;
  }

  void write_atomically(std::string_view key, std::string_view value) {
    std::string final_path = value_path(key);
    std::string temp_path = directory_ + "/t." + encode_key(key).substr(0, 40) + "." + unique_suffix();
    int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      fail_descriptor_call(fmt::format("FileStore: creating '{}' for key {}", temp_path, printable(key)),
                           err);
    }
    std::string_view rest = value;
    while (!rest.empty()) {
      ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        ::unlink(temp_path.c_str());
        fail_errno(fmt::format("FileStore: writing '{}' for key {}", temp_path, printable(key)), err);
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    // No fsync: a rendezvous does not outlive a crash of the host, and fsync on NFS costs milliseconds.
    if (::close(fd) != 0 || ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
      int err = errno;
      ::unlink(temp_path.c_str());
      fail_errno(fmt::format("FileStore: publishing '{}' for key {}", final_path, printable(key)), err);
    }
  }

  KeyLock lock_key(std::string_view key, std::string_view call) {
    std::string path = lock_path(key);
    auto deadline = Deadline::after(rendezvous::clamp_store_wait(timeout()));
    auto pause = std::chrono::duration_cast<Clock::duration>(kFirstLockRetry);
    for (;;) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        return KeyLock(path);
      }
      if (const int err = errno; err != EEXIST)
        fail_descriptor_call(
            fmt::format("{}({}) on the FileStore: creating the lock '{}'", call, printable(key), path), err);
      break_if_stale(path);
      if (!pause_before_retry(deadline, pause, std::chrono::duration_cast<Clock::duration>(kMaxLockRetry)))
        fail(ErrorCode::Timeout,
             "{}({}) on the FileStore timed out after {} ms waiting for the lock '{}' (remove it by hand if "
             "no rank "
             "of this job is alive)",
             call, printable(key), rendezvous::clamp_store_wait(timeout()).count(), path);
    }
  }

  // A lock file older than kStaleLockAge is left by a process that died holding it. Renaming it to a
  // unique name first means exactly one process breaks it.
  void break_if_stale(const std::string& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) return;
    auto age = std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(info.st_mtime);
    if (age < kStaleLockAge) return;
    std::string stale = path + ".stale." + unique_suffix();
    if (::rename(path.c_str(), stale.c_str()) == 0) {
      log::warn("FileStore: broke the lock '{}', {} s old: its holder died", path,
                std::chrono::duration_cast<std::chrono::seconds>(age).count());
      ::unlink(stale.c_str());
    }
  }

  std::string directory_;
};

}  // namespace

std::shared_ptr<Store> open_file_store(const std::string& directory) {
  if (directory.empty())
    fail(ErrorCode::Config, "open_file_store: the directory is empty (CANOPY_STORE_FILE='')");
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec || !std::filesystem::is_directory(directory, ec))
    fail(ErrorCode::Config, "open_file_store: '{}' is not a directory that can be created or used: {}",
         directory, ec ? ec.message() : std::string("exists and is not a directory"));
  if (::access(directory.c_str(), W_OK | X_OK) != 0)
    fail(ErrorCode::Config, "open_file_store: the directory '{}' is not writable: {}", directory,
         std::strerror(errno));
  return std::make_shared<FileStore>(directory);
}

}  // namespace canopy
