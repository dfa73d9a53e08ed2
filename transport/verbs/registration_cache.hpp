// Memory registrations of user buffers, shared while in use and optionally kept afterwards.
//
// Registering memory (ibv_reg_mr) pins pages and costs a system call plus page-table work: far too
// much per message. Small messages therefore never register (they go through the pre-registered
// staging pool); large ones lease a registration from this cache. A lease covering the requested
// range is reused; page-aligned ranges let neighbouring chunks of one buffer share a registration.
//
// Keeping idle registrations (keep_idle) is what makes repeated collectives on the same buffers
// cheap, but it is only safe while those buffers stay allocated: a registration pins the physical
// pages it was made on, so a buffer freed and re-allocated at the same address would be written
// through the stale registration. Hence it is opt-in (CANOPY_IB_REG_CACHE=1): MPI libraries solve
// this with malloc/munmap hooks, which Canopy does not install.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

namespace canopy::transport::verbs {

struct Registration {
  void* handle = nullptr;  // the ibv_mr, opaque here so that tests need no device
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

class RegistrationCache {
 public:
  using RegisterFn = std::function<Registration(std::uintptr_t begin, std::size_t length, bool writable)>;
  using DeregisterFn = std::function<void(const Registration&)>;

  struct Lease {
    std::uint64_t entry = 0;
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
  };

  // `capacity`: how many idle registrations to keep when keep_idle (least recently used go first).
  RegistrationCache(RegisterFn register_fn, DeregisterFn deregister_fn, bool keep_idle, std::size_t capacity);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [address, address + length), writable by the device (receives) or not
  // (sends). Throws whatever register_fn throws.
  Lease acquire(const void* address, std::size_t length, bool writable);
  void release(const Lease& lease);

  // Deregisters everything, leased or not: only once no transfer can touch the memory any more.
  void clear();

  std::size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    bool writable = false;
    Registration registration;
    int leases = 0;
    std::uint64_t last_use = 0;
  };
  void trim();

  RegisterFn register_fn_;
  DeregisterFn deregister_fn_;
  bool keep_idle_;
  std::size_t capacity_;
  std::map<std::uint64_t, Entry> entries_;
  std::uint64_t next_entry_ = 1;
  std::uint64_t clock_ = 0;
};

}  // namespace canopy::transport::verbs
