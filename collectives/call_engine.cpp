#include "collectives/call_engine.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "collectives/call_buffers.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy::collectives {
namespace {

bool is_rooted(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather ||
         c == Collective::Scatter;
}

void grow_to(std::vector<std::byte>& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
}

}  // namespace

CallEngine::CallEngine(CallEngineSetup setup)
    : rank_(setup.rank),
      size_(setup.size),
      comm_id_(setup.comm_id),
      timeout_(setup.timeout),
      hosts_(std::move(setup.hosts)),
      transport_(setup.transport),
      host_cells_(setup.transport->host_cells()),
      cost_model_(std::move(setup.cost_model)),
      algorithm_overrides_(std::move(setup.algorithm_overrides)),
      chunk_bytes_(setup.chunk_bytes) {}

void CallEngine::validate(const CollectiveArgs& args) const {
  if (is_rooted(args.collective) && (args.root < 0 || args.root >= size_))
    fail(ErrorCode::InvalidArgument, "{}: root {} is not a rank of this group of {}",
         to_string(args.collective), args.root, size_);
  if (args.count > 0) {
    // A gather's output and a scatter's input exist at the root only.
    const bool needs_input = args.collective != Collective::Scatter || rank_ == args.root;
    const bool needs_output = args.collective != Collective::Gather || rank_ == args.root;
    if ((needs_input && args.input == nullptr) || (needs_output && args.output == nullptr))
      fail(ErrorCode::InvalidArgument, "{}: null buffer for {} elements", to_string(args.collective),
           args.count);
  }
  if (args.collective == Collective::AllToAllV &&
      (args.send_counts == nullptr || args.recv_counts == nullptr))
    fail(ErrorCode::InvalidArgument, "all_to_all_v: no send or receive counts");
}

void CallEngine::describe_call(const CollectiveArgs& args, const CollectiveOptions& options,
                               CollectiveCall& call) const {
  std::size_t element_size = size_of(args.dtype);
  std::size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes : chunk_bytes_;
  call.collective = args.collective;
  call.rank = rank_;
  call.size = size_;
  call.count = args.collective == Collective::Barrier ? 0 : args.count;
  call.root = is_rooted(args.collective) ? args.root : 0;
  call.chunk_count = std::max<std::uint64_t>(1, chunk_bytes / element_size);
  call.in_place = true;  // until the call's buffers say otherwise
  if (call.hosts != hosts_) call.hosts = hosts_;
  call.cell_bytes = host_cells_ != nullptr ? host_cells_->cell_bytes() : 0;
  if (args.collective == Collective::AllToAllV) {
    call.send_counts.assign(args.send_counts, args.send_counts + size_);
    call.recv_counts.assign(args.recv_counts, args.recv_counts + size_);
  } else {
    call.send_counts.clear();
    call.recv_counts.clear();
  }
}

std::string_view CallEngine::requested_algorithm(Collective collective,
                                                 const CollectiveOptions& options) const {
  std::string_view name = options.algorithm;  // a view: no copy on every call
  if (name.empty())
    if (auto it = algorithm_overrides_.find(collective); it != algorithm_overrides_.end()) name = it->second;
  return name == "auto" ? std::string_view{} : name;
}

bool CallEngine::follows_stream(const CollectiveArgs& args, std::string_view requested) const {
  return BroadcastStream::follows(args, !requested.empty(), transport_->carries_flags());
}

const Algorithm& CallEngine::select(const CollectiveCall& call, std::size_t element_size,
                                    std::string_view name, Pace pace, std::string* explanation,
                                    bool remember) {
  if (!name.empty()) {
    const Algorithm* algorithm = find_algorithm(call.collective, name);
    if (algorithm == nullptr) {
      std::string known;
      for (const Algorithm& a : algorithms(call.collective))
        known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
      fail(ErrorCode::InvalidArgument, "{} has no algorithm '{}' (known: {}, auto)",
           to_string(call.collective), name, known);
    }
    if (explanation) *explanation = fmt::format("{}: {} (asked for)", to_string(call.collective), name);
    return *algorithm;
  }
  if (!remember) {
    const AlgorithmChoice choice = cost_model_.evaluate(call, element_size, pace);
    if (explanation) *explanation = choice.explanation;
    return *choice.algorithm;  // the tables' own entry, not the choice's
  }
  const auto& choice = cost_model_.choose(call, element_size, pace);
  if (explanation) *explanation = choice.explanation;
  return *choice.algorithm;
}

double CallEngine::predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                           Pace pace) const {
  if (call.collective == Collective::AllToAllV) return 0;  // a rank knows only its own counts
  const auto prediction = collectives::predict(algorithm, call, element_size, cost_model_.link());
  return pace == Pace::Stream ? prediction.stream_seconds : prediction.seconds;
}

void CallEngine::run(const CollectiveArgs& args, const CollectiveOptions& options, std::uint64_t seq) {
  std::size_t element_size = size_of(args.dtype);
  CollectiveCall& call = call_;
  describe_call(args, options, call);
  const std::string_view requested = requested_algorithm(args.collective, options);
  const bool follows_stream = this->follows_stream(args, requested);
  const Pace pace = stream_.pace(follows_stream);
  std::string explanation;
  const Algorithm& algorithm =
      select(call, element_size, requested, pace, log::level() <= log::Level::Info ? &explanation : nullptr);
  if (!explanation.empty()) log::info("#{} {}", seq, explanation);
  const CallBuffers buffers = prepare_call_buffers(args, rank_, size_, scratch_);
  call.in_place = buffers.in_place;
  // A one-shot call that fits the host's cells goes through them; every other call sends its schedule's messages.
  const Route route =
      algorithm.one_shot && call.through_cells(element_size) ? Route::Cells : Route::Messages;
  const CompiledSchedule& compiled = schedules_.get(algorithm, call, route);
  grow_to(staging_, compiled.schedule.staging_count * element_size);
  if (!compiled.peers_expected) {
    // Links made on first use learn where all of this schedule's peers listen in one store request.
    compiled.peers_expected = true;
    if (!compiled.peers.empty()) transport_->expect_peers(compiled.peers);
  }

  ExecutionContext context;
  context.transport = transport_;
  context.cells = host_cells_;
  context.envelope = {comm_id_,
                      seq,
                      args.collective,
                      args.dtype,
                      args.op,
                      algorithm_index(algorithm),
                      static_cast<std::uint32_t>(call.root),
                      call.count,
                      0};
  // Before anything can block: a peer that runs this call another way (one through the cells, the other with
  // messages) learns it from this, where no frame header would ever reach it.
  if (host_cells_ != nullptr) host_cells_->declare(context.envelope);
  context.data = buffers.data;
  context.input = buffers.input;
  context.staging = staging_.data();
  context.element_size = element_size;
  context.dtype = args.dtype;
  context.op = args.op == ReduceOp::Avg ? ReduceOp::Sum : args.op;
  // One clock read at the start serves the deadline, the flight recorder and stream detection; only a
  // broadcast that follows a stream reads one at its end too: on a small call each read is a measurable part
  // of what this rank itself spends.
  const Clock::time_point started = Clock::now();
  context.deadline = Deadline(started + (options.timeout.count() > 0 ? options.timeout : timeout_));
  const bool is_root = rank_ == call.root;
  const double one_call_seconds =
      stream_.root_may_be_back_to_back(follows_stream, is_root)
          ? cost_model_.choose(call, element_size, Pace::OneCall).predicted_seconds
          : 0;
  context.envelope.flags = stream_.flags_at_start(follows_stream, is_root, started, one_call_seconds);
  std::size_t slot = recorder_.start(
      {seq, args.collective, algorithm.name, args.count, args.dtype, args.op, call.root, {}, {}, 0}, started);
  std::uint8_t heard_flags = 0;
  try {
    executor_.run(compiled, context);
    heard_flags = executor_.heard_flags();
  } catch (const Error& e) {
    recorder_.failed(slot, Clock::now());
    throw CallFailed{e};
  }
  recorder_.done(slot);
  stream_.finished(follows_stream, is_root, heard_flags);
  finish_call_buffers(args, rank_, size_, buffers.data);
}

}  // namespace canopy::collectives
