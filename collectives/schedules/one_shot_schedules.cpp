// The one-shot algorithms. Through the host's cells (transport/shm/host_cells.hpp; collectives/one_shot.cpp
// runs them) every rank writes its buffer into its cell once and reads the cells it needs where they lie:
// one round on any number of ranks. The result is the root's buffer, then every other rank's in rank order,
// reduced left to right: x_root (op) x_0 (op) x_1 ..., with rank 0 as an all-reduce's root, the same bits on
// every rank. Where no cells carry a call (another transport, a payload larger than a cell), the schedules
// below compute those bits with messages: a flat reduce in that order, and for an all-reduce a flat
// broadcast of the result, the barrier a flat fan-in to rank 0 and fan-out.
#include <optional>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {
namespace {

// The root reduces every other rank's buffer into its own in rank order (round 1).
void write_flat_reduce(StepWriter& writer, int root, const Block& data) {
  if (writer.rank() != root) {
    writer.send_chunks(root, data, 1);
    return;
  }
  for (int peer = 0; peer < writer.size(); ++peer)
    if (peer != root) writer.recv_reduce_chunks(peer, data, 1, /*incoming_first=*/false);
}

}  // namespace

Schedule all_reduce_one_shot(const CollectiveCall& call) {
  StepWriter writer(call);
  const Block data = data_block(0, call.count);
  write_flat_reduce(writer, 0, data);
  if (call.rank == 0) {
    for (int peer = 1; peer < call.size; ++peer) writer.send_chunks(peer, data, 2);
  } else {
    writer.recv_chunks(0, data, 2);
  }
  return std::move(writer).finish();
}

Schedule reduce_one_shot(const CollectiveCall& call) {
  StepWriter writer(call);
  write_flat_reduce(writer, call.root, data_block(0, call.count));
  return std::move(writer).finish();
}

// Everyone tells rank 0 it arrived; rank 0, once all have, tells everyone (zero-byte messages: the waits
// are written out, one after the other).
Schedule barrier_one_shot(const CollectiveCall& call) {
  StepWriter writer(call);
  const Block nothing = data_block(0, 0);
  if (call.rank != 0) {
    const StepIndex arrived = writer.send(0, nothing, message_tag(1, 0));
    writer.recv(0, nothing, message_tag(2, 0), {arrived});
    return std::move(writer).finish();
  }
  std::optional<StepIndex> heard;
  for (int peer = 1; peer < call.size; ++peer)
    heard = heard ? writer.recv(peer, nothing, message_tag(1, 0), {*heard})
                  : writer.recv(peer, nothing, message_tag(1, 0));
  for (int peer = 1; peer < call.size; ++peer) writer.send(peer, nothing, message_tag(2, 0), {*heard});
  return std::move(writer).finish();
}

// One publication's alpha, then the bytes every rank copies and reduces (a rank writes its cell and reads
// the cells it needs), on as many cores as the host lends its ranks. A cell's few KiB are in the caches:
// copying and reducing them each cost the in-cache reduce rate (gamma where that was not measured).
Prediction predict_through_cells(const CollectiveCall& call, std::size_t element_size,
                                 const LinkModel& model) {
  const auto bytes = call.count * element_size;
  const auto p = static_cast<double>(call.size);
  const LinkCost& memory = model.within_host;
  const double per_byte = model.gamma_in_cache > 0 ? model.gamma_in_cache : model.gamma;
  const double copy = static_cast<double>(bytes) * per_byte;  // a copy or a reduce of one cell
  double work = 0;
  std::size_t publications = static_cast<std::size_t>(call.size);
  switch (call.collective) {
    case Collective::Barrier:
      break;  // a stamp and nothing else
    case Collective::Broadcast:
      work = 2 * copy;  // the root's copy in, each reader's copy out
      // Each reader takes the root's cell as it would take a message: the same work at both ends (the
      // cost model's ties count messages for it).
      publications = static_cast<std::size_t>(call.size - 1);
      break;
    default:  // all-reduce and reduce: each rank's copy in, then every cell read and all but one reduced
      work = (1 + p) * copy + (p - 1) * copy;
      break;
  }
  const HostLayout& layout = call.layout();
  const int host = layout.host_of(call.rank);
  const double ranks_per_core =
      std::max(1.0, static_cast<double>(layout.ranks_on(host)) / static_cast<double>(layout.cores_of(host)));
  Prediction prediction;
  prediction.seconds = memory.alpha + work * ranks_per_core;
  prediction.stream_seconds = prediction.seconds;
  // A broadcast's root runs up to a slot short of all of them ahead of its readers: in a stream only the
  // copies take the cores, as a stream of messages through memory does in the simulator. On 2 ranks it is
  // one writer and one reader, as the flat broadcast's one message is, which measured as fast or faster
  // (0.16-0.18 us a call at 64 B against 0.19): the stream is then timed by its latency.
  if (call.collective == Collective::Broadcast && call.size > 2)
    prediction.stream_seconds =
        std::max(copy, p * copy / std::min(p, static_cast<double>(layout.cores_of(host))));
  prediction.messages = publications;
  return prediction;
}

}  // namespace canopy::collectives
