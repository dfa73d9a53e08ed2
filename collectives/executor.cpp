#include "collectives/executor.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/error.hpp"

namespace canopy::collectives {

namespace {

// A reduce or copy larger than this runs in slices of it, and between slices the transport moves what
// it can without waiting (sends, and receives already buffered): with one thread driving the sockets
// and computing, a 1 MiB reduce would otherwise leave them idle for its whole duration, and a 64 MiB
// copy (a broadcast root's result) would hold back the first send until it is done. 256 KiB keeps the
// slices in L2 and the extra transport calls rare; smaller steps are not sliced.
constexpr std::size_t kComputeSliceBytes = 256 * 1024;

bool overlaps(const Block& a, const Block& b) {
  return a.buffer == b.buffer && a.count > 0 && b.count > 0 && a.offset < b.offset + b.count &&
         b.offset < a.offset + a.count;
}

// Whether `step` reads or writes any of `block`.
bool touches(const Step& step, const Block& block) {
  switch (step.kind) {
    case StepKind::Send: return overlaps(step.src, block);
    case StepKind::Recv: return overlaps(step.dst, block);
    case StepKind::RecvReduce: return overlaps(step.staging, block) || overlaps(step.dst, block);
    case StepKind::Copy: return overlaps(step.src, block) || overlaps(step.dst, block);
  }
  return true;
}

}  // namespace

CompiledSchedule::CompiledSchedule(Schedule s, int world_size)
    : schedule(std::move(s)),
      dependents(schedule.steps.size()),
      start(schedule.steps.size()),
      sends_to(static_cast<std::size_t>(world_size)),
      recvs_from(static_cast<std::size_t>(world_size)) {
  for (std::uint32_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    start[i].waiting_to_finish = static_cast<std::uint32_t>(step.deps.size());
    for (std::uint32_t dep : step.deps) {
      bool gates_start = step.kind != StepKind::RecvReduce || touches(schedule.steps[dep], step.staging);
      dependents[dep].push_back({i, gates_start});
      if (gates_start) ++start[i].waiting_to_start;
    }
    if (step.kind == StepKind::Send) sends_to[step.peer].push_back(i);
    if (step.kind == StepKind::Recv || step.kind == StepKind::RecvReduce) recvs_from[step.peer].push_back(i);
  }
  for (std::size_t peer = 0; peer < sends_to.size(); ++peer)
    if (!sends_to[peer].empty() || !recvs_from[peer].empty()) peers.push_back(static_cast<int>(peer));
}

CompiledSchedule::CompiledSchedule(const CellsCall& call) : route(Route::Cells), cells_call(call) {}

void Executor::run(const CompiledSchedule& compiled, const ExecutionContext& context) {
  if (compiled.route == Route::Cells) {
    heard_flags_ = run_through_cells(compiled.cells_call, context);
    return;
  }
  compiled_ = &compiled;
  context_ = &context;
  const auto& steps = compiled.schedule.steps;
  steps_.assign(compiled.start.begin(), compiled.start.end());
  if (in_place_.size() < steps.size()) in_place_.resize(steps.size());
  next_.assign(compiled.sends_to.size(), NextToPost{});
  local_ready_.clear();
  in_flight_.clear();
  moved_while_computing_.clear();
  finished_ = 0;
  heard_flags_ = 0;
  context.transport->take_arrived_flags();  // a stale report from an earlier call

  for (std::uint32_t i = 0; i < steps.size(); ++i)
    if (steps_[i].waiting_to_start == 0) make_ready(i);

  while (finished_ < steps.size()) {
    while (!local_ready_.empty()) {
      std::uint32_t step = local_ready_.back();
      local_ready_.pop_back();
      start(step);
    }
    if (finished_ == steps.size()) break;
    // First what completed while this thread computed (keep_transport_moving), else wait for more.
    completed_ids_.clear();
    completed_ids_.swap(moved_while_computing_);
    if (completed_ids_.empty()) {
      if (in_flight_.empty())
        fail(ErrorCode::Protocol, "rank {}: schedule stalled with {} of {} steps unfinished (a schedule bug)",
             context.transport->rank(), steps.size() - finished_, steps.size());
      if (!context.transport->progress(context.deadline, completed_ids_)) fail_timeout();
    }
    heard_flags_ |= context.transport->take_arrived_flags();
    for (transport::OpId id : completed_ids_) {
      auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [id](const InFlight& f) { return f.id == id; });
      if (it == in_flight_.end()) continue;  // not ours (cannot happen while calls are serialised)
      std::uint32_t step = it->step;
      *it = in_flight_.back();
      in_flight_.pop_back();
      if (steps_[step].reduced_on_arrival)
        complete(step);  // reduced as it arrived
      else if (steps[step].kind == StepKind::RecvReduce)
        received(step);
      else
        complete(step);
    }
  }
}

// Messages to (or from) one peer must be posted in step order, because the transport keeps them in
// FIFO order per peer and the other side matches them in its own step order.
void Executor::make_ready(std::uint32_t step) {
  steps_[step].ready = true;
  const Step& s = compiled_->schedule.steps[step];
  if (s.kind == StepKind::Copy) {
    local_ready_.push_back(step);
    return;
  }
  post_ready_messages(s.peer);
}

void Executor::post_ready_messages(int peer) {
  NextToPost& next = next_[peer];
  const auto& sends = compiled_->sends_to[peer];
  while (next.send < sends.size() && steps_[sends[next.send]].ready) start(sends[next.send++]);
  const auto& recvs = compiled_->recvs_from[peer];
  while (next.recv < recvs.size() && steps_[recvs[next.recv]].ready) start(recvs[next.recv++]);
}

void Executor::start(std::uint32_t step) {
  const Step& s = compiled_->schedule.steps[step];
  transport::Envelope envelope = context_->envelope;
  envelope.step = s.tag;
  envelope.flags |= heard_flags_;
  auto& transport = *context_->transport;
  std::size_t size = context_->element_size;
  switch (s.kind) {
    case StepKind::Send:
      in_flight_.push_back({transport.post_send(s.peer, envelope, {read_address(s.src), s.src.count * size}), step});
      return;
    case StepKind::Recv:
      in_flight_.push_back({transport.post_recv(s.peer, envelope, {address(s.dst), s.dst.count * size}), step});
      return;
    case StepKind::RecvReduce:
      // Nothing else uses the destination any more: reduce each piece as it arrives, out of the transport's
      // memory where it can hand it over. Otherwise (or over sockets) receive into staging, reduce later.
      if (steps_[step].waiting_to_finish == 0 && transport.receives_in_place(s.peer)) {
        steps_[step].reduced_on_arrival = true;
        in_place_[step].executor = this;
        in_place_[step].step = step;
        in_flight_.push_back(
            {transport.post_recv_in_place(s.peer, envelope, s.staging.count * size, in_place_[step]), step});
        return;
      }
      in_flight_.push_back(
          {transport.post_recv(s.peer, envelope, {address(s.staging), s.staging.count * size}), step});
      return;
    case StepKind::Copy:
      if (s.src.buffer == s.dst.buffer) {
        if (s.src.count > 0) std::memmove(address(s.dst), read_address(s.src), s.src.count * size);
      } else {
        in_slices(s.src.count, [&](std::uint64_t offset, std::uint64_t count) {
          std::memcpy(address(s.dst) + offset * size, read_address(s.src) + offset * size, count * size);
        });
      }
      complete(step);
      return;
  }
}

// The message of a RecvReduce is in staging; the reduce may still wait for steps that use its destination.
void Executor::received(std::uint32_t step) {
  steps_[step].received = true;
  if (steps_[step].waiting_to_finish == 0) reduce_and_complete(step);
}

void Executor::reduce_and_complete(std::uint32_t step) {
  const Step& s = compiled_->schedule.steps[step];
  const std::size_t size = context_->element_size;
  in_slices(s.dst.count, [&](std::uint64_t offset, std::uint64_t count) {
    reduce(s, offset, address(s.staging) + offset * size, count);
  });
  complete(step);
}

// dst = src (op) incoming over `count` elements from `offset`: src is dst itself, or (the first reduce of a
// block out of place) the input.
void Executor::reduce(const Step& s, std::uint64_t offset, const std::byte* incoming, std::uint64_t count) const {
  const std::size_t size = context_->element_size;
  reduce_to(context_->dtype, context_->op, address(s.dst) + offset * size, read_address(s.src) + offset * size,
            incoming, count, s.incoming_first);
}

void Executor::ReduceInPlace::consume(std::uint64_t offset, std::span<const std::byte> piece) {
  const std::size_t size = executor->context_->element_size;
  executor->reduce(executor->compiled_->schedule.steps[step], offset / size, piece.data(), piece.size() / size);
}

void Executor::complete(std::uint32_t step) {
  ++finished_;
  for (const auto& [next, gates_start] : compiled_->dependents[step]) {
    // Counted down before `next` may start: a RecvReduce that starts with nothing left to wait for
    // receives in place.
    CompiledSchedule::StepState& state = steps_[next];
    const bool may_finish = --state.waiting_to_finish == 0;
    if (gates_start && --state.waiting_to_start == 0) make_ready(next);
    if (may_finish && state.received) reduce_and_complete(next);
  }
}

template <typename Work>
void Executor::in_slices(std::uint64_t count, Work&& work) {
  const std::uint64_t slice = std::max<std::uint64_t>(1, kComputeSliceBytes / context_->element_size);
  for (std::uint64_t done = 0; done < count; done += slice) {
    work(done, std::min(slice, count - done));
    if (done + slice < count) keep_transport_moving();
  }
}

// Completions are only collected here (the run loop handles them next): no step starts or finishes
// inside another step's computation.
void Executor::keep_transport_moving() {
  context_->transport->progress(Deadline::after(Clock::duration::zero()), moved_while_computing_);
}

std::byte* Executor::address(const Block& block) const {
  std::byte* base = block.buffer == Buffer::Data ? context_->data : context_->staging;
  return base + block.offset * context_->element_size;
}

const std::byte* Executor::read_address(const Block& block) const {
  if (block.buffer == Buffer::Input) return context_->input + block.offset * context_->element_size;
  return address(block);
}

void Executor::fail_timeout() const {
  std::set<int> silent;
  for (const InFlight& f : in_flight_) {
    const Step& s = compiled_->schedule.steps[f.step];
    if (s.kind != StepKind::Send) silent.insert(s.peer);
  }
  if (silent.empty())
    for (const InFlight& f : in_flight_) silent.insert(compiled_->schedule.steps[f.step].peer);
  fail(ErrorCode::Timeout, "rank {}: {} timed out waiting for rank(s) {} ({} of {} steps unfinished)",
       context_->transport->rank(), transport::describe(context_->envelope), fmt::join(silent, ", "),
       compiled_->schedule.steps.size() - finished_, compiled_->schedule.steps.size());
}

}  // namespace canopy::collectives
