#include "tests/transport/directory_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.hpp"

namespace canopy::testing {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file_atomically(const std::string& path, std::string_view value) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out) fail(ErrorCode::System, "DirectoryStore: cannot write {}", temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail_errno("DirectoryStore: rename");
}

// Serialises read-modify-write operations between processes.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory)
      : fd_(::open((directory + "/.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) fail_errno("DirectoryStore: lock");
  }
  ~DirectoryLock() { ::close(fd_); }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string DirectoryStore::path_of(std::string_view key) const {
  std::string name;
  for (char c : key) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      name += c;
    } else {
      name += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    }
  }
  return directory_ + "/" + name;
}

void DirectoryStore::set(std::string_view key, std::string_view value) { write_file_atomically(path_of(key), value); }

std::string DirectoryStore::get(std::string_view key, Duration timeout) {
  auto give_up = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto value = read_file(path_of(key))) return *value;
    if (std::chrono::steady_clock::now() >= give_up)
      fail(ErrorCode::Timeout, "DirectoryStore: key '{}' did not appear within {} ms", key, timeout.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::int64_t DirectoryStore::add(std::string_view key, std::int64_t delta) {
  DirectoryLock lock(directory_);
  auto value = read_file(path_of(key));
  std::int64_t result = (value && !value->empty() ? std::stoll(*value) : 0) + delta;
  write_file_atomically(path_of(key), std::to_string(result));
  return result;
}

std::string DirectoryStore::compare_set(std::string_view key, std::string_view expected, std::string_view desired) {
  DirectoryLock lock(directory_);
  std::string current = read_file(path_of(key)).value_or("");
  if (current != expected) return current;
  write_file_atomically(path_of(key), desired);
  return std::string(desired);
}

bool DirectoryStore::check(const std::vector<std::string>& keys) {
  for (const auto& key : keys)
    if (::access(path_of(key).c_str(), F_OK) != 0) return false;
  return true;
}

void DirectoryStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  for (const auto& key : keys) get(key, timeout);
}

bool DirectoryStore::remove(std::string_view key) { return std::remove(path_of(key).c_str()) == 0; }

}  // namespace canopy::testing
