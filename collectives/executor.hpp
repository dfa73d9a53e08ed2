// Runs one rank's part of a call, whatever its algorithm. Along a schedule's messages it posts every step
// whose dependencies are done, drives the transport's I/O on the calling thread, and reduces each received
// chunk as soon as it lands, so that receiving, reducing and sending overlap (a large reduce or copy runs in
// slices, with the transport moving between them); a one-shot call through the host's cells is handed to
// them (collectives/one_shot.hpp). See docs/SCHEDULES.md for the schedule model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/execution_context.hpp"
#include "collectives/one_shot.hpp"
#include "collectives/schedules/schedule.hpp"
#include "common/deadline.hpp"
#include "transport/transport.hpp"

namespace canopy::collectives {

// How a call moves its data: messages along its schedule's steps, or the host's cells (a one-shot
// algorithm's call that fits them; collectives/one_shot.hpp).
enum class Route : std::uint8_t { Messages, Cells };

// A call's plan, as the executor runs it and the schedule cache keeps it. Along Route::Messages, a schedule
// with what the executor derives from it once: who depends on whom, and the order in which messages to /
// from each peer must be posted. Along Route::Cells, no steps: the call's description for the cells.
//
// A RecvReduce is two actions: receiving into its staging block, then reducing into its destination.
// Only the dependencies that touch the staging block have to finish before the receive is posted; the
// rest (say, a send still reading the destination) only hold back the reduce. Posting receives early is
// what keeps two ranks that send to each other at once from both waiting, with full socket buffers,
// for the other to read.
struct CompiledSchedule {
  struct Dependent {
    std::uint32_t step;
    bool gates_start;  // must finish before `step` may start (for a RecvReduce: post its receive)
  };
  // Where a step stands during a run. Every run starts from `start` below, copied in one go: a small call's
  // schedule has a step or two, and resetting several vectors one by one cost it more than running them.
  struct StepState {
    std::uint32_t waiting_to_start = 0;   // unfinished deps that gate its start
    std::uint32_t waiting_to_finish = 0;  // unfinished deps of any kind
    bool ready = false;
    bool received = false;            // RecvReduce: its message is in staging
    bool reduced_on_arrival = false;  // RecvReduce: received in place (the executor's sink for it reduced it)
  };

  Route route = Route::Messages;
  CellsCall cells_call;  // Route::Cells
  Schedule schedule;
  std::vector<std::vector<Dependent>> dependents;   // step -> steps waiting for it
  std::vector<StepState> start;                     // step -> its state when a run starts
  std::vector<std::vector<std::uint32_t>> sends_to;    // peer -> its Send steps, in step order
  std::vector<std::vector<std::uint32_t>> recvs_from;  // peer -> its Recv/RecvReduce steps, in step order
  std::vector<int> peers;  // every peer it sends to or receives from, in rank order
  // Whether its peers were announced to the transport (Transport::expect_peers): on its first run only.
  mutable bool peers_expected = false;

  CompiledSchedule(Schedule schedule, int world_size);
  // A call through the host's cells.
  explicit CompiledSchedule(const CellsCall& call);
};

class Executor {
 public:
  // Runs `compiled` to completion (along its route), or throws the transport's Error (peer failed, mismatch, abort) or
  // Error(Timeout) naming the peers whose messages were still outstanding.
  void run(const CompiledSchedule& compiled, const ExecutionContext& context);

  // The flags the last run's messages brought (ORed). Each message this rank sends carries its own
  // (context.envelope.flags) and what it had heard when posting it: where a rank forwards only what it
  // received, as in a broadcast, the root's flags reach every rank.
  std::uint8_t heard_flags() const { return heard_flags_; }

 private:
  struct InFlight {
    transport::OpId id;
    std::uint32_t step;
  };
  // A RecvReduce whose message the transport hands over where it lies (shared memory): each piece is
  // reduced into the destination straight from there, never copied into staging first.
  struct ReduceInPlace final : transport::PieceSink {
    Executor* executor = nullptr;
    std::uint32_t step = 0;
    void consume(std::uint64_t offset, std::span<const std::byte> piece) override;
  };

  void make_ready(std::uint32_t step);
  void post_ready_messages(int peer);
  void start(std::uint32_t step);
  void received(std::uint32_t step);
  void reduce_and_complete(std::uint32_t step);
  void reduce(const Step& s, std::uint64_t offset, const std::byte* incoming, std::uint64_t count) const;
  void complete(std::uint32_t step);
  // Runs work(offset, count) over [0, count) in slices, letting the transport move between them.
  template <typename Work>
  void in_slices(std::uint64_t count, Work&& work);
  void keep_transport_moving();
  std::byte* address(const Block& block) const;
  const std::byte* read_address(const Block& block) const;
  [[noreturn]] void fail_timeout() const;

  struct NextToPost {
    std::size_t send = 0;  // index into sends_to[peer]
    std::size_t recv = 0;  // index into recvs_from[peer]
  };

  // Per-call state, kept between calls so that steady state allocates nothing.
  const CompiledSchedule* compiled_ = nullptr;
  const ExecutionContext* context_ = nullptr;
  std::vector<CompiledSchedule::StepState> steps_;  // step -> where it stands
  std::vector<ReduceInPlace> in_place_;     // step -> its sink, used while reduced_on_arrival (never reset)
  std::vector<NextToPost> next_;            // peer -> its next messages to post
  std::vector<std::uint32_t> local_ready_;  // Copy steps ready to run
  std::vector<InFlight> in_flight_;
  std::vector<transport::OpId> completed_ids_;
  std::vector<transport::OpId> moved_while_computing_;  // completed during keep_transport_moving()
  std::size_t finished_ = 0;
  std::uint8_t heard_flags_ = 0;
};

}  // namespace canopy::collectives
