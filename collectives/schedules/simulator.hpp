// Runs the schedules of all ranks of one call in one process, on plain memory: checks them (every
// message received is the one sent, nothing deadlocks, nothing writes outside its buffer) and, under
// an alpha-beta-gamma model, predicts the time. Also records who sent what to whom for the tracer.
//
// The model: an event-driven run of all ranks' schedules. Each rank has one outgoing and one incoming
// link of each class (to the other ranks of its host, and to the network) and one CPU, each doing one
// thing at a time: a message occupies the sender's outgoing link and the receiver's incoming link of its
// class for its LinkCost::message_seconds (alpha and its bytes: so a root sending to 7 peers takes 7 times as
// long as sending to one), and a reduce occupies the receiver's CPU for bytes * gamma (a copy as well). A
// message within a host costs LinkModel::within_host, one between hosts between_hosts; the bytes of the
// latter also hold the sending host's outgoing network link and the receiving host's incoming one, which
// all ranks of a host share (its alpha does not: flight and wake-ups leave the wire to the others), so
// four ranks of a host sending across at once share its link as four TCP streams share a NIC, while
// each of them still moves messages inside the host. Without a layout every rank is a host of its own,
// every message goes between hosts, and each rank has the textbook model's one link each way.
// Ranks of one host that outnumber its cores share them: a message between two of them also needs one
// of the host's cores for its bytes and its share of alpha (LinkCost::alpha_share_on_core: through shared
// memory none, over loopback what was measured), and its bytes take a second core for as long again (the
// sender copies them into the socket and the receiver out of it, at once);
// so eight such ranks on two cores move two small messages at once but only one large one, and an
// algorithm that has every rank send in every round (recursive doubling, the all-gather half of
// scatter-allgather) pays for it where a tree, sending less at once, does not. A message between hosts
// takes no core: its wire, not the copies at either end, sets its time. On such a host a reduction (or
// copy) needs one of its cores too, as well as its rank's own CPU: eight ranks on two cores reduce two
// chunks at a time.
// A message's logical round is one more than the rounds of the messages it waits for: those its data
// came with, and the previous messages on the two links it uses (the seed's flat broadcast takes p-1
// rounds: one friend after the other).
// Sends are eager: a message travels as soon as its step is ready and both links are free, whether or
// not the receiver has posted its receive; the k-th receive from a peer takes the k-th message. What one
// rank's schedule must satisfy alone is checked first (schedule_checks.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/host_layout.hpp"
#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

// One class of links. alpha: seconds per message; beta: seconds per byte.
// A message's first eager_bytes cost beta_eager each instead of beta: a socket takes that much from the
// sender without waiting for the reader, so a message that fits is two memory copies, while a longer one
// streams at the pace of sender and receiver waking each other (on loopback 2-5 times slower per byte).
// Messages sent back to back on one connection share its eager bytes (the simulator keeps the account).
struct LinkCost {
  double alpha = 20e-6;
  double beta = 1.0 / 1.0e9;
  double beta_eager = 1.0 / 1.0e9;
  std::uint64_t eager_bytes = 0;
  // Where ranks outnumber cores, the share of a message's alpha that holds one of them besides its bytes'
  // copies: 1, all of it (the textbook model's pace); through shared memory 0 (flight and the receiver's
  // turn take no core); over loopback TCP what the start-up probe measures, the kernel's send and receive
  // paths and the turns of the ranks queued for the cores (docs/SCHEDULES.md, *Ranks sharing cores*).
  double alpha_share_on_core = 1.0;

  // A message whose first `eager` bytes (at most eager_bytes) fit the socket buffer.
  double message_seconds(std::uint64_t bytes, std::uint64_t eager) const {
    return alpha + byte_seconds(bytes, eager);
  }
  // Its bytes alone, without the per-message alpha.
  double byte_seconds(std::uint64_t bytes, std::uint64_t eager) const {
    return static_cast<double>(eager) * beta_eager + static_cast<double>(bytes - eager) * beta;
  }
  // A message sent on an idle connection.
  double message_seconds(std::uint64_t bytes) const {
    return message_seconds(bytes, std::min(bytes, eager_bytes));
  }
};

// The alpha-beta-gamma model, with two classes of links: between two ranks of one host (loopback, shared
// memory) and between hosts (the network; a host's ranks share its link there, see simulate()). Which
// ranks share a host is the call's (CollectiveCall::hosts); without a layout every rank is a host of its
// own and only between_hosts is used. gamma: seconds per byte reduced.
struct LinkModel {
  LinkModel() = default;
  // The textbook model: every link alike, every byte at beta.
  LinkModel(double alpha_seconds, double beta_seconds_per_byte, double gamma_seconds_per_byte)
      : within_host{alpha_seconds, beta_seconds_per_byte, beta_seconds_per_byte, 0},
        between_hosts(within_host),
        gamma(gamma_seconds_per_byte) {}

  LinkCost within_host;
  LinkCost between_hosts;
  double gamma = 1.0 / 10.0e9;
  // Seconds per byte reduced where both operands are in the cache (a host cell's few KiB: the one-shot
  // algorithms' copies and reduces); 0: unknown, gamma stands for it.
  double gamma_in_cache = 0;

  const LinkCost& link(bool same_host) const { return same_host ? within_host : between_hosts; }
  // The larger alpha of the two: what a message costs at worst before its bytes.
  double slowest_alpha() const { return std::max(within_host.alpha, between_hosts.alpha); }
  // Both classes set to `link`.
  void set_every_link(const LinkCost& link) { within_host = between_hosts = link; }
};

// One message as the simulator timed it.
struct TransferEvent {
  int from = 0;
  int to = 0;
  std::uint32_t tag = 0;
  Block block;  // the sender's source block
  std::uint64_t bytes = 0;
  double start = 0;  // seconds
  double finish = 0;
  int round = 0;  // logical round: 1 + the latest round this message depends on
};

struct Simulation {
  std::vector<std::vector<std::byte>> data;  // each rank's Data buffer afterwards
  std::vector<TransferEvent> transfers;
  double predicted_seconds = 0;  // when the last rank finishes
  int rounds = 0;
};

// One rank's buffers when the call starts: Data (call.data_count() elements) and, where the input is a
// buffer of its own (out of place, or a collective whose input is not in Data), Input
// (call.input_count() elements; empty otherwise).
struct RankBuffers {
  std::vector<std::byte> data;
  std::vector<std::byte> input;
};

// `calls[r]` is rank r's view of the call (its rank, and for all-to-all-v its counts); every rank's
// schedule is built and run. Throws Error(Protocol) with a precise description when the schedules are
// inconsistent (tag or size mismatch, deadlock, a block out of range).
// Every rank's call carries the same layout (CollectiveCall::hosts), which sets each message's link class;
// a message between hosts also takes its bytes' time on both hosts' links, which a host's ranks share.
Simulation simulate(const Algorithm& algorithm, std::vector<CollectiveCall> calls, DataType type, ReduceOp op,
                    std::vector<RankBuffers> buffers, const LinkModel& model = {});

// The same for a call every rank sees alike but for its rank (`call.rank` is ignored). Where the input
// lies in Data (CollectiveCall::input_in_data), `inputs[r]` is rank r's Data before the call
// (call.data_count() elements of `type`) and an out-of-place call takes its input region from there;
// elsewhere `inputs[r]` is rank r's Input (call.input_count() elements) and Data starts as garbage.
Simulation simulate(const Algorithm& algorithm, const CollectiveCall& call, DataType type, ReduceOp op,
                    std::vector<std::vector<std::byte>> inputs, const LinkModel& model = {});

// `call` as seen by each rank 0..call.size-1.
std::vector<CollectiveCall> every_rank(const CollectiveCall& call);

// What the cost model asks (no data moved): the predicted seconds of one call, how many messages all
// ranks send, and the seconds per call in a stream of such calls back to back, where one call's
// messages overlap the next's and the busiest rank (or a host's shared cores) sets the pace.
struct Prediction {
  double seconds = 0;
  std::size_t messages = 0;
  double stream_seconds = 0;
  // The simulation passed its PredictionBound and stopped there: seconds and stream_seconds are lower
  // bounds, messages those sent until then.
  bool cut_off = false;
};
// How slow a candidate may be and still matter: a simulation stops once its clock passes `seconds`, or
// its busiest rank's work passes `stream_seconds` (so a first call at hundreds of ranks does not time to
// the end an algorithm that has already lost).
struct PredictionBound {
  double seconds = std::numeric_limits<double>::infinity();
  double stream_seconds = std::numeric_limits<double>::infinity();
};
// A one-shot algorithm's call through the host's cells is timed by predict_through_cells() instead.
Prediction predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                   const LinkModel& model, const PredictionBound& bound = {});
Prediction predict_through_cells(const CollectiveCall& call, std::size_t element_size,
                                 const LinkModel& model);

// The predicted seconds alone.
double predict_seconds(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                       const LinkModel& model);

}  // namespace canopy::collectives
