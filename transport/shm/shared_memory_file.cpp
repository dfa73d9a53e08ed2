#include "transport/shm/shared_memory_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/fd_limit.hpp"

namespace canopy::transport {

UniqueFd create_shared_memory(const char* name, std::size_t bytes, const std::string& what) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) {
    const int err = errno;
    fail_descriptor_call(fmt::format("shared memory: memfd_create() for {}", what), err);
  }
  if (::fchmod(fd.get(), 0600) != 0) fail_errno("shared memory: fchmod 0600");
  if (int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); error != 0) {
    const bool used_up = error == ENOSPC || error == ENOMEM;  // a limit of the machine, not a fault
    fail(used_up ? ErrorCode::Resource : ErrorCode::System, "shared memory: allocating {} ({} bytes): {}{}",
         what, bytes, std::strerror(error),
         used_up ? " (the machine's memory for shared pages, or this process's memory cgroup, is used up)"
                 : "");
  }
  // The size is fixed from now on: a peer never maps more than there is.
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  return fd;
}

void check_offered_memory(int fd, std::size_t bytes, const std::string& what) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) fail_errno(fmt::format("shared memory: fstat of the offered {}", what));
  if (!S_ISREG(status.st_mode) || static_cast<std::uint64_t>(status.st_size) != bytes)
    fail(ErrorCode::Protocol, "shared memory: the offered {} has {} bytes, not {}", what, status.st_size,
         bytes);
  if (status.st_uid != ::getuid() || (status.st_mode & 077) != 0)
    fail(ErrorCode::Protocol,
         "shared memory: the offered {} is not private to this user (owner {}, mode {:o})", what,
         status.st_uid, status.st_mode & 0777);
}

std::byte* map_shared_memory(int fd, std::size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) fail_errno(fmt::format("shared memory: mmap of {} bytes", bytes));
  ::madvise(base, bytes, MADV_DONTFORK);
  return static_cast<std::byte*>(base);
}

}  // namespace canopy::transport
