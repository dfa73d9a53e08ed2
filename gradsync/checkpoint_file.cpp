// One checkpoint file: header (magic, version, step, size, checksum) then the bytes. Written under a
// temporary name, fsynced, renamed, and the directory fsynced, so that a crash at any point leaves either
// the old set of checkpoints or the old set plus the complete new one.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "canopy/checkpoint.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy {
namespace {

constexpr char kMagic[8] = {'C', 'A', 'N', 'O', 'P', 'Y', 'C', 'K'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".ckpt";

std::uint64_t checksum(std::string_view data) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a, 8 bytes at a time would be faster; this is cold
  for (unsigned char c : data) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

template <typename T>
void put(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
template <typename T>
T take(const std::string& in, std::size_t at) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

std::string file_name(std::uint64_t step) {
  return fmt::format("{}{:012}{}", kPrefix, step, kSuffix);
}

// The step of a complete checkpoint's name, or -1 for anything else (temporaries, other files).
long long step_of(const std::string& name) {
  std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

std::vector<std::string> list_directory(const std::string& directory) {
  std::vector<std::string> names;
  DIR* dir = opendir(directory.c_str());
  if (!dir) {
    if (errno == ENOENT) return names;
    fail_errno(fmt::format("checkpoint: cannot list directory '{}'", directory));
  }
  while (dirent* entry = readdir(dir)) names.emplace_back(entry->d_name);
  closedir(dir);
  return names;
}

void write_all(int fd, const char* data, std::size_t size, std::uint64_t step, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno(fmt::format("checkpoint step {}: cannot write '{}'", step, path));
    if (n == 0)
      fail(ErrorCode::System, "checkpoint step {}: cannot write '{}': the write made no progress", step,
           path);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void fsync_directory(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno(fmt::format("checkpoint: cannot open directory '{}' to fsync it", directory));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) fail_errno(fmt::format("checkpoint: fsync of directory '{}'", directory), err);
}

std::optional<Checkpoint> read_complete(const std::string& path, std::uint64_t step) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    log::warn("checkpoint: skipping '{}': {}", path, std::strerror(errno));
    return std::nullopt;
  }
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  auto reject = [&](const char* why) {
    log::warn("checkpoint: skipping '{}': {}", path, why);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0)
    return reject("not a checkpoint");
  if (take<std::uint32_t>(bytes, 8) != kVersion) return reject("unknown version");
  if (take<std::uint64_t>(bytes, 16) != step) return reject("its header names another step");
  std::uint64_t size = take<std::uint64_t>(bytes, 24);
  if (bytes.size() - kHeaderBytes != size) return reject("truncated or too long");
  std::string data = bytes.substr(kHeaderBytes);
  if (checksum(data) != take<std::uint64_t>(bytes, 32)) return reject("checksum mismatch");
  return Checkpoint{step, std::move(data), path};
}

}  // namespace

std::string write_checkpoint_file(const std::string& directory, std::uint64_t step, std::string_view data,
                                  int keep_last) {
  if (keep_last < 1)
    fail(ErrorCode::InvalidArgument, "checkpoint: keep_last must be at least 1, got {}", keep_last);
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST)
    fail_errno(fmt::format("checkpoint step {}: cannot create directory '{}'", step, directory));
  std::string final_path = directory + "/" + file_name(step);
  std::string temp_path = fmt::format("{}/.{}.tmp-{}", directory, file_name(step), ::getpid());

  std::string header;
  header.append(kMagic, 8);
  put<std::uint32_t>(header, kVersion);
  put<std::uint32_t>(header, 0);
  put<std::uint64_t>(header, step);
  put<std::uint64_t>(header, data.size());
  put<std::uint64_t>(header, checksum(data));

  int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno(fmt::format("checkpoint step {}: cannot create '{}'", step, temp_path));
  try {
    write_all(fd, header.data(), header.size(), step, temp_path);
    write_all(fd, data.data(), data.size(), step, temp_path);
    if (::fsync(fd) != 0) fail_errno(fmt::format("checkpoint step {}: fsync of '{}'", step, temp_path));
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) fail_errno(fmt::format("checkpoint step {}: close of '{}'", step, temp_path));
    if (::rename(temp_path.c_str(), final_path.c_str()) != 0)
      fail_errno(fmt::format("checkpoint step {}: rename '{}' -> '{}'", step, temp_path, final_path));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp_path.c_str());  // the previous checkpoints are untouched
    throw;
  }
  fsync_directory(directory);

  // Keep the newest keep_last; also sweep temporaries a crashed save left behind.
  std::vector<std::pair<long long, std::string>> complete;
  for (const std::string& name : list_directory(directory)) {
    long long s = step_of(name);
    if (s >= 0)
      complete.emplace_back(s, name);
    else if (name.rfind(".checkpoint-", 0) == 0 && name.find(".tmp-") != std::string::npos)
      ::unlink((directory + "/" + name).c_str());
  }
  std::sort(complete.rbegin(), complete.rend());
  for (std::size_t i = static_cast<std::size_t>(keep_last); i < complete.size(); ++i)
    ::unlink((directory + "/" + complete[i].second).c_str());
  return final_path;
}

std::optional<Checkpoint> find_latest_checkpoint(const std::string& directory) {
  std::vector<std::pair<long long, std::string>> complete;
  for (const std::string& name : list_directory(directory)) {
    long long s = step_of(name);
    if (s >= 0) complete.emplace_back(s, name);
  }
  std::sort(complete.rbegin(), complete.rend());
  for (const auto& [step, name] : complete) {
    if (auto checkpoint = read_complete(directory + "/" + name, static_cast<std::uint64_t>(step)))
      return checkpoint;
  }
  return std::nullopt;
}

}  // namespace canopy
