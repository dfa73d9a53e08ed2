#include "collectives/executor.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/error.hpp"

namespace canopy::collectives {

CompiledSchedule::CompiledSchedule(Schedule s, int world_size)
    : schedule(std::move(s)),
      dependents(schedule.steps.size()),
      sends_to(static_cast<std::size_t>(world_size)),
      recvs_from(static_cast<std::size_t>(world_size)) {
  for (std::uint32_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    for (std::uint32_t dep : step.deps) dependents[dep].push_back(i);
    if (step.kind == StepKind::Send) sends_to[step.peer].push_back(i);
    if (step.kind == StepKind::Recv || step.kind == StepKind::RecvReduce) recvs_from[step.peer].push_back(i);
  }
}

void Executor::run(const CompiledSchedule& compiled, const ExecutionContext& context) {
  compiled_ = &compiled;
  context_ = &context;
  const auto& steps = compiled.schedule.steps;
  std::size_t peers = compiled.sends_to.size();
  waiting_on_.assign(steps.size(), 0);
  ready_.assign(steps.size(), false);
  next_send_.assign(peers, 0);
  next_recv_.assign(peers, 0);
  local_ready_.clear();
  in_flight_.clear();
  finished_ = 0;

  for (std::uint32_t i = 0; i < steps.size(); ++i) waiting_on_[i] = static_cast<std::uint32_t>(steps[i].deps.size());
  for (std::uint32_t i = 0; i < steps.size(); ++i)
    if (waiting_on_[i] == 0) make_ready(i);

  while (finished_ < steps.size()) {
    while (!local_ready_.empty()) {
      std::uint32_t step = local_ready_.back();
      local_ready_.pop_back();
      start(step);
    }
    if (finished_ == steps.size()) break;
    if (in_flight_.empty())
      fail(ErrorCode::Protocol, "rank {}: schedule stalled with {} of {} steps unfinished (a schedule bug)",
           context.transport->rank(), steps.size() - finished_, steps.size());
    completed_ids_.clear();
    if (!context.transport->progress(context.deadline, completed_ids_)) fail_timeout();
    for (transport::OpId id : completed_ids_) {
      auto it = std::find_if(in_flight_.begin(), in_flight_.end(), [id](const InFlight& f) { return f.id == id; });
      if (it == in_flight_.end()) continue;  // not ours (cannot happen while calls are serialised)
      std::uint32_t step = it->step;
      *it = in_flight_.back();
      in_flight_.pop_back();
      const Step& s = steps[step];
      if (s.kind == StepKind::RecvReduce)
        reduce_into(context.dtype, context.op, address(s.dst), address(s.staging), s.dst.count, s.incoming_first);
      complete(step);
    }
  }
}

// Messages to (or from) one peer must be posted in step order, because the transport keeps them in
// FIFO order per peer and the other side matches them in its own step order.
void Executor::make_ready(std::uint32_t step) {
  ready_[step] = true;
  const Step& s = compiled_->schedule.steps[step];
  if (s.kind == StepKind::Copy) {
    local_ready_.push_back(step);
    return;
  }
  post_ready_messages(s.peer);
}

void Executor::post_ready_messages(int peer) {
  const auto& sends = compiled_->sends_to[peer];
  while (next_send_[peer] < sends.size() && ready_[sends[next_send_[peer]]]) start(sends[next_send_[peer]++]);
  const auto& recvs = compiled_->recvs_from[peer];
  while (next_recv_[peer] < recvs.size() && ready_[recvs[next_recv_[peer]]]) start(recvs[next_recv_[peer]++]);
}

void Executor::start(std::uint32_t step) {
  const Step& s = compiled_->schedule.steps[step];
  transport::Envelope envelope = context_->envelope;
  envelope.step = s.tag;
  auto& transport = *context_->transport;
  std::size_t size = context_->element_size;
  switch (s.kind) {
    case StepKind::Send:
      in_flight_.push_back({transport.post_send(s.peer, envelope, {address(s.src), s.src.count * size}), step});
      return;
    case StepKind::Recv:
      in_flight_.push_back({transport.post_recv(s.peer, envelope, {address(s.dst), s.dst.count * size}), step});
      return;
    case StepKind::RecvReduce:
      in_flight_.push_back(
          {transport.post_recv(s.peer, envelope, {address(s.staging), s.staging.count * size}), step});
      return;
    case StepKind::Copy:
      if (s.src.count > 0) std::memmove(address(s.dst), address(s.src), s.src.count * size);
      complete(step);
      return;
  }
}

void Executor::complete(std::uint32_t step) {
  ++finished_;
  for (std::uint32_t next : compiled_->dependents[step])
    if (--waiting_on_[next] == 0) make_ready(next);
}

std::byte* Executor::address(const Block& block) const {
  std::byte* base = block.buffer == Buffer::Data ? context_->data : context_->staging;
  return base + block.offset * context_->element_size;
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
