// libibverbs, loaded at the first verbs call rather than linked into every program: it brings libnl along,
// paged in by every rank of every job, where most run over TCP or shared memory (common/shared_library.hpp
// says how the calls find it). The data path's calls (ibv_post_send, ibv_poll_cq, ...) are the header's
// inline functions through the device's own table, never these. CANOPY_IBVERBS_RUNTIME is the run-time file
// CMake found (canopy_runtime_library).
#include <infiniband/verbs.h>

#include "common/shared_library.hpp"

namespace canopy::transport::verbs {
namespace {

const SharedLibrary& verbs_library() {
  static const SharedLibrary library({CANOPY_IBVERBS_RUNTIME, "libibverbs.so.1"},
                                     "no RDMA device: the verbs transport",
                                     "install it (Debian: apt-get install libibverbs1 and the device's "
                                     "provider, ibverbs-providers), or use CANOPY_TRANSPORT=tcp");
  return library;
}

}  // namespace
}  // namespace canopy::transport::verbs

using canopy::transport::verbs::verbs_library;

// Devices and ports.
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_device**, ibv_get_device_list, (int* num_devices), (num_devices))
CANOPY_FORWARD_TO_LOADED(verbs_library, void, ibv_free_device_list, (ibv_device * *list), (list))
CANOPY_FORWARD_TO_LOADED(verbs_library, const char*, ibv_get_device_name, (ibv_device * device), (device))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_context*, ibv_open_device, (ibv_device * device), (device))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_close_device, (ibv_context * context), (context))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_query_device,
                         (ibv_context * context, ibv_device_attr* device_attr), (context, device_attr))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_query_port,
                         (ibv_context * context, uint8_t port_num, _compat_ibv_port_attr* port_attr),
                         (context, port_num, port_attr))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, _ibv_query_gid_ex,
                         (ibv_context * context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                          uint32_t flags, size_t entry_size),
                         (context, port_num, gid_index, entry, flags, entry_size))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_get_async_event,
                         (ibv_context * context, ibv_async_event* event), (context, event))
CANOPY_FORWARD_TO_LOADED(verbs_library, void, ibv_ack_async_event, (ibv_async_event * event), (event))
// Protection domains, memory, completion queues and channels, queue pairs.
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_pd*, ibv_alloc_pd, (ibv_context * context), (context))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_dealloc_pd, (ibv_pd * pd), (pd))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_mr*, ibv_reg_mr,
                         (ibv_pd * pd, void* addr, size_t length, int access), (pd, addr, length, access))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_mr*, ibv_reg_mr_iova2,
                         (ibv_pd * pd, void* addr, size_t length, uint64_t iova, unsigned int access),
                         (pd, addr, length, iova, access))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_dereg_mr, (ibv_mr * mr), (mr))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_comp_channel*, ibv_create_comp_channel, (ibv_context * context),
                         (context))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_destroy_comp_channel, (ibv_comp_channel * channel),
                         (channel))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_cq*, ibv_create_cq,
                         (ibv_context * context, int cqe, void* cq_context, ibv_comp_channel* channel,
                          int comp_vector),
                         (context, cqe, cq_context, channel, comp_vector))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_destroy_cq, (ibv_cq * cq), (cq))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_get_cq_event,
                         (ibv_comp_channel * channel, ibv_cq** cq, void** cq_context),
                         (channel, cq, cq_context))
CANOPY_FORWARD_TO_LOADED(verbs_library, void, ibv_ack_cq_events, (ibv_cq * cq, unsigned int nevents),
                         (cq, nevents))
CANOPY_FORWARD_TO_LOADED(verbs_library, ibv_qp*, ibv_create_qp, (ibv_pd * pd, ibv_qp_init_attr* qp_init_attr),
                         (pd, qp_init_attr))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_modify_qp, (ibv_qp * qp, ibv_qp_attr* attr, int attr_mask),
                         (qp, attr, attr_mask))
CANOPY_FORWARD_TO_LOADED(verbs_library, int, ibv_destroy_qp, (ibv_qp * qp), (qp))
// Names for messages.
CANOPY_FORWARD_TO_LOADED(verbs_library, const char*, ibv_port_state_str, (ibv_port_state port_state),
                         (port_state))
CANOPY_FORWARD_TO_LOADED(verbs_library, const char*, ibv_event_type_str, (ibv_event_type event), (event))
CANOPY_FORWARD_TO_LOADED(verbs_library, const char*, ibv_wc_status_str, (ibv_wc_status status), (status))
