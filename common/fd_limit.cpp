#include "common/fd_limit.hpp"

#include <dirent.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace canopy {
namespace {

// The system-wide maximum of open files (fs.file-max), or "" when it cannot be read.
std::string system_file_max() {
  std::FILE* file = std::fopen("/proc/sys/fs/file-max", "re");
  if (file == nullptr) return {};
  unsigned long long value = 0;
  const bool read = std::fscanf(file, "%llu", &value) == 1;
  std::fclose(file);
  return read ? std::to_string(value) : std::string();
}

// "this process has 40 open", or what EMFILE itself says when /proc cannot be listed without a descriptor.
std::string open_text(int err, rlim_t soft) {
  const int open = open_descriptor_count();
  if (open >= 0) return fmt::format("this process has {} open", open);
  if (err == EMFILE) return fmt::format("this process has all {} open", limit_text(soft));
  return "this process's open descriptors cannot be counted";
}

}  // namespace

bool out_of_descriptors(int err) {
  return err == EMFILE || err == ENFILE;
}

int open_descriptor_count() {
  DIR* directory = ::opendir("/proc/self/fd");
  if (directory == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = ::readdir(directory))
    if (entry->d_name[0] != '.') ++count;
  ::closedir(directory);
  return count - 1;  // the directory's own descriptor
}

std::string limit_text(rlim_t limit) {
  return limit == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit);
}

std::string descriptor_limit_message(std::string_view what, int err, std::string_view need) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  const std::string soft = limit_text(limit.rlim_cur);
  const std::string hard = limit_text(limit.rlim_max);
  const std::string needs = need.empty() ? std::string() : fmt::format("; {}", need);
  if (err == ENFILE) {
    const std::string file_max = system_file_max();
    return fmt::format(
        "{}: the system's table of open files is full (ENFILE{}); RLIMIT_NOFILE is {} (soft), {} (hard), and "
        "{}{}. Close files other programs hold, or raise fs.file-max (sysctl, as root)",
        what, file_max.empty() ? "" : ", fs.file-max " + file_max, soft, hard, open_text(err, limit.rlim_cur),
        needs);
  }
  const std::string fix =
      limit.rlim_cur < limit.rlim_max
          ? fmt::format(
                "raise the soft limit in the shell that starts the ranks (`ulimit -n {}`), or start them "
                "with canopy-run, which raises it to the hard limit",
                hard)
          : "the soft limit is already the hard one: raise the hard limit (as root: `ulimit -Hn`, "
            "/etc/security/limits.conf, or LimitNOFILE= for a systemd service)";
  return fmt::format(
      "{}: out of file descriptors (EMFILE): RLIMIT_NOFILE is {} (soft), {} (hard), and {}{}. To fix it, {}",
      what, soft, hard, open_text(err, limit.rlim_cur), needs, fix);
}

void fail_descriptor_call(std::string_view what, int err, std::string_view need) {
  if (out_of_descriptors(err)) throw Error(ErrorCode::Resource, descriptor_limit_message(what, err, need));
  fail_errno(what, err);
}

}  // namespace canopy
