// libpmix, loaded at the first PMIx call rather than linked into every program: it brings libevent, hwloc,
// libnl, munge and udev along, paged in by every rank of every job, where only ranks started by a PMIx
// launcher without a store address call it (common/shared_library.hpp says how the calls find it).
// CANOPY_PMIX_RUNTIME is the run-time file CMake found (canopy_runtime_library).
#include <pmix.h>

#include "common/shared_library.hpp"

namespace canopy::rendezvous {
namespace {

const SharedLibrary& pmix_library() {
  static const SharedLibrary library({CANOPY_PMIX_RUNTIME, "libpmix.so.2"},
                                     "finding the store through a PMIx launcher",
                                     "install it (Debian: apt-get install libpmix2), or give the store's "
                                     "address (MASTER_ADDR and MASTER_PORT)");
  return library;
}

}  // namespace
}  // namespace canopy::rendezvous

using canopy::rendezvous::pmix_library;

CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Init,
                         (pmix_proc_t * proc, pmix_info_t info[], size_t ninfo), (proc, info, ninfo))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Finalize, (const pmix_info_t info[], size_t ninfo),
                         (info, ninfo))
CANOPY_FORWARD_TO_LOADED(pmix_library, const char*, PMIx_Error_string, (pmix_status_t status), (status))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Get,
                         (const pmix_proc_t* proc, const char key[], const pmix_info_t info[], size_t ninfo,
                          pmix_value_t** val),
                         (proc, key, info, ninfo, val))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Put,
                         (pmix_scope_t scope, const char key[], pmix_value_t* val), (scope, key, val))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Commit, (void), ())
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Fence,
                         (const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[], size_t ninfo),
                         (procs, nprocs, info, ninfo))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Info_load,
                         (pmix_info_t * info, const char* key, const void* data, pmix_data_type_t type),
                         (info, key, data, type))
CANOPY_FORWARD_TO_LOADED(pmix_library, pmix_status_t, PMIx_Value_load,
                         (pmix_value_t * val, const void* data, pmix_data_type_t type), (val, data, type))
CANOPY_FORWARD_TO_LOADED(pmix_library, void, PMIx_Value_destruct, (pmix_value_t * val), (val))
