#include "rendezvous/pmix_exchange.hpp"

#include <pmix.h>

#include <algorithm>
#include <cstring>

#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::rendezvous {
namespace {

constexpr const char* kKey = "canopy.shared";

// PMIx_Init without a server to reach makes this process a singleton of its own: refuse before that.
bool pmix_server_advertised() {
  for (const char* name : {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI2",
                           "PMIX_SERVER_URI21", "PMIX_SERVER_URI"}) {
    if (env_value(name)) return true;
  }
  return false;
}

void check(pmix_status_t status, const char* call) {
  if (status == PMIX_SUCCESS) return;
  fail(status == PMIX_ERR_TIMEOUT ? ErrorCode::Timeout : ErrorCode::System, "PMIx: {} failed: {}", call,
       PMIx_Error_string(status));
}

// One PMIx client session: PMIx_Init until destroyed.
class PmixClient {
 public:
  PmixClient() {
    if (!pmix_server_advertised())
      fail(ErrorCode::Config,
           "PMIx: no PMIx server to reach (no PMIX_SERVER_URI* variable): the launcher is not PMIx-capable");
    pmix_status_t status = PMIx_Init(&self_, nullptr, 0);
    if (status != PMIX_SUCCESS)
      fail(ErrorCode::Config, "PMIx: cannot reach the launcher's PMIx server: PMIx_Init: {}",
           PMIx_Error_string(status));
  }
  ~PmixClient() { PMIx_Finalize(nullptr, 0); }
  PmixClient(const PmixClient&) = delete;
  PmixClient& operator=(const PmixClient&) = delete;

  const pmix_proc_t& self() const { return self_; }
  pmix_proc_t proc(pmix_rank_t rank) const {
    pmix_proc_t proc;
    PMIX_PROC_LOAD(&proc, self_.nspace, rank);
    return proc;
  }

  // A value of this job (rank `PMIX_RANK_WILDCARD`) or of one rank; the caller releases it.
  pmix_value_t* get(pmix_rank_t rank, const char* key, int timeout_seconds) {
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_seconds, PMIX_INT);
    pmix_proc_t from = proc(rank);
    pmix_value_t* value = nullptr;
    pmix_status_t status = PMIx_Get(&from, key, &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);
    check(status, "PMIx_Get");
    return value;
  }

 private:
  pmix_proc_t self_{};
};

}  // namespace

bool pmix_built() {
  return true;
}

std::string share_from_rank_zero_through_pmix(int rank, int world_size, const std::string& value,
                                              Duration timeout) {
  PmixClient pmix;
  const int timeout_seconds = static_cast<int>(std::max<long long>(1, (timeout.count() + 999) / 1000));
  if (pmix.self().rank != static_cast<pmix_rank_t>(rank))
    fail(ErrorCode::Config, "PMIx: the launcher's PMIx server says this is rank {}, the environment says {}",
         pmix.self().rank, rank);
  pmix_value_t* size = pmix.get(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, timeout_seconds);
  std::uint32_t job_size = size->type == PMIX_UINT32 ? size->data.uint32 : 0;
  PMIX_VALUE_RELEASE(size);
  if (job_size != static_cast<std::uint32_t>(world_size))
    fail(ErrorCode::Config,
         "PMIx: the launcher's PMIx server says the job has {} ranks, the environment says {}", job_size,
         world_size);

  if (rank == 0) {
    pmix_value_t shared;
    PMIX_VALUE_LOAD(&shared, value.c_str(), PMIX_STRING);
    pmix_status_t status = PMIx_Put(PMIX_GLOBAL, kKey, &shared);
    PMIX_VALUE_DESTRUCT(&shared);
    check(status, "PMIx_Put");
    check(PMIx_Commit(), "PMIx_Commit");
  }
  // Every rank waits here until rank 0 has committed the value (and every rank has arrived).
  pmix_info_t fence_info[2];
  bool collect = true;
  PMIX_INFO_LOAD(&fence_info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&fence_info[1], PMIX_TIMEOUT, &timeout_seconds, PMIX_INT);
  pmix_proc_t everyone = pmix.proc(PMIX_RANK_WILDCARD);
  pmix_status_t status = PMIx_Fence(&everyone, 1, fence_info, 2);
  PMIX_INFO_DESTRUCT(&fence_info[0]);
  PMIX_INFO_DESTRUCT(&fence_info[1]);
  if (status == PMIX_ERR_TIMEOUT)
    fail(ErrorCode::Timeout, "PMIx: not every one of the {} ranks arrived at the fence within {} s",
         world_size, timeout_seconds);
  check(status, "PMIx_Fence");
  if (rank == 0) return value;

  pmix_value_t* got = pmix.get(0, kKey, timeout_seconds);
  std::string shared = got->type == PMIX_STRING && got->data.string != nullptr ? got->data.string : "";
  PMIX_VALUE_RELEASE(got);
  log::debug("PMIx: rank {} got '{}' from rank 0", rank, shared);
  return shared;
}

}  // namespace canopy::rendezvous
