#include "canopy/communicator.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "collectives/call_sequencer.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/environment_group.hpp"
#include "collectives/executor.hpp"
#include "collectives/first_failure.hpp"
#include "collectives/flight_recorder.hpp"
#include "collectives/host_layout_exchange.hpp"
#include "collectives/kernels/reduce_kernels.hpp"
#include "collectives/link_calibration.hpp"
#include "collectives/liveness_monitor.hpp"
#include "collectives/schedule_cache.hpp"
#include "common/cpu_list.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"
#include "transport/frame.hpp"
#include "transport/select_transport.hpp"

namespace canopy {

using collectives::Algorithm;
using collectives::CollectiveCall;

namespace {

constexpr std::size_t kDefaultChunkBytes = 1 << 20;

bool is_rooted(Collective c) { return c == Collective::Broadcast || c == Collective::Reduce; }
bool is_reduction(Collective c) {
  return c == Collective::Reduce || c == Collective::AllReduce || c == Collective::ReduceScatter;
}

// "all_reduce", "allreduce" and "all-reduce" all name the same collective.
std::string squash(std::string_view name) {
  std::string out;
  for (char c : name)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

// CANOPY_ALGO: "ring" (for every collective that has an algorithm of that name) or a list such as
// "allreduce=ring,broadcast=binomial".
std::map<Collective, std::string> parse_algorithm_overrides(const std::string& text) {
  std::map<Collective, std::string> overrides;
  constexpr Collective kCollectives[] = {Collective::Broadcast, Collective::Reduce, Collective::AllReduce,
                                         Collective::AllGather, Collective::ReduceScatter, Collective::Barrier};
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      for (Collective c : kCollectives)
        if (collectives::find_algorithm(c, item) != nullptr) overrides[c] = item;
      continue;
    }
    std::string collective = squash(item.substr(0, eq));
    std::string algorithm = item.substr(eq + 1);
    bool known = false;
    for (Collective c : kCollectives) {
      if (squash(to_string(c)) != collective) continue;
      known = true;
      if (algorithm != "auto" && collectives::find_algorithm(c, algorithm) == nullptr)
        fail(ErrorCode::Config, "CANOPY_ALGO: {} has no algorithm '{}'", to_string(c), algorithm);
      overrides[c] = algorithm;
    }
    if (!known) fail(ErrorCode::Config, "CANOPY_ALGO: unknown collective '{}'", item.substr(0, eq));
  }
  return overrides;
}

// CANOPY_CHUNK_BYTES: bytes, with an optional K/M/G suffix (powers of 1024).
std::size_t default_chunk_bytes() {
  auto text = env_value("CANOPY_CHUNK_BYTES");
  if (!text) return kDefaultChunkBytes;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text->c_str(), &end, 10);
  switch (*end) {
    case 'K': case 'k': value <<= 10; ++end; break;
    case 'M': case 'm': value <<= 20; ++end; break;
    case 'G': case 'g': value <<= 30; ++end; break;
    default: break;
  }
  if (end == text->c_str() || *end != '\0' || value == 0)
    fail(ErrorCode::Config, "CANOPY_CHUNK_BYTES='{}' must be a positive size such as 1M", *text);
  return value;
}

void grow(std::vector<std::byte>& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
}

}  // namespace

class Communicator::Impl {
 public:
  Impl(std::shared_ptr<Store> base_store, int rank, int size, const CommunicatorOptions& options);

  void run(const CollectiveArgs& args, const CollectiveOptions& options, std::uint64_t seq);
  void send(std::span<const std::byte> data, int peer, std::uint32_t tag, bool is_send, std::span<std::byte> out);
  const Algorithm& select(const CollectiveCall& call, std::size_t element_size,
                          const CollectiveOptions& options, collectives::Pace pace, std::string* explanation);
  std::string_view requested_algorithm(Collective collective, const CollectiveOptions& options) const;
  bool follows_stream(const CollectiveArgs& args, const CollectiveOptions& options) const;
  collectives::Pace pace() const {
    return in_stream_.load(std::memory_order_relaxed) ? collectives::Pace::Stream
                                                      : collectives::Pace::OneCall;
  }
  CollectiveCall describe_call(const CollectiveArgs& args, const CollectiveOptions& options) const;
  void validate(const CollectiveArgs& args) const;
  void abort(const std::string& reason);
  const collectives::LinkModel& link() const { return cost_model_.link(); }
  std::string_view transport_name() const { return transport_->name(); }
  double predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                 collectives::Pace pace) const {
    const auto prediction = collectives::predict(algorithm, call, element_size, cost_model_.link());
    return pace == collectives::Pace::Stream ? prediction.stream_seconds : prediction.seconds;
  }

  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::unique_ptr<TcpStoreServer> store_server;  // when this rank hosts the store (torchrun-style rank 0)
  collectives::CallSequencer sequencer;

 private:
  // The buffers one call's schedule works on: Data (where the result ends) and, out of place, Input.
  struct CallBuffers {
    std::byte* data = nullptr;
    const std::byte* input = nullptr;
    bool in_place = true;
  };
  CallBuffers prepare_data(const CollectiveArgs& args, std::size_t element_size);
  void finish_data(const CollectiveArgs& args, std::byte* data, std::size_t element_size);
  void ensure_usable();

  std::shared_ptr<Store> store_;
  Duration timeout_;
  std::uint64_t comm_id_ = 0;
  std::unique_ptr<transport::Transport> transport_;
  collectives::CostModel cost_model_;
  collectives::ScheduleCache schedules_;
  collectives::Executor executor_;
  std::map<Collective, std::string> algorithm_overrides_;
  std::size_t chunk_bytes_;
  std::vector<std::byte> staging_;  // grows to the largest call's need, then is reused
  std::vector<std::byte> scratch_;  // a working copy where the user's buffer must stay intact
  std::vector<std::uint64_t> p2p_sent_, p2p_received_;
  collectives::FlightRecorder recorder_;
  std::mutex failure_mutex_;
  std::string failure_;  // set once a call failed: the communicator is then unusable
  std::optional<collectives::FirstFailure> first_failure_;      // tells every rank who failed first
  // A stream of broadcasts (docs/SCHEDULES.md): whether the previous call was a broadcast whose root
  // called it back to back with the one before. Every rank learns it from that call's frames, so all
  // agree, and auto then chooses for a stream's pace instead of one call's latency.
  std::atomic<bool> in_stream_{false};
  std::optional<Clock::time_point> last_broadcast_end_;  // this rank's, while broadcasts follow each other
  std::unique_ptr<collectives::LivenessMonitor> liveness_;     // last member: stops before the rest goes
};

Communicator::Impl::Impl(std::shared_ptr<Store> base_store, int rank_, int size_,
                         const CommunicatorOptions& options)
    : rank(rank_),
      size(size_),
      timeout_(options.timeout.count() > 0 ? options.timeout : default_timeout()),
      algorithm_overrides_(parse_algorithm_overrides(env_value("CANOPY_ALGO").value_or(""))),
      chunk_bytes_(default_chunk_bytes()),
      p2p_sent_(size_, 0),
      p2p_received_(size_, 0) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "rank {} is not within a group of {} ranks", rank, size);
  log::set_rank(rank);
  // Each rank numbers the communicators it forms on this store; ranks form them in the same order,
  // so the numbers agree, and the keys and handshakes of one communicator never meet another's.
  comm_id_ = static_cast<std::uint64_t>(base_store->add(fmt::format("canopy/communicators/{}", rank), 1));
  store_ = std::make_shared<PrefixStore>(base_store, fmt::format("canopy/comm/{}", comm_id_));
  store_->set_timeout(timeout_);

  const collectives::HostLayout hosts = collectives::exchange_host_layout(
      *store_, rank, size, rendezvous::host_identity(current_environment()), allowed_cpus());
  if (options.local_rank >= 0 && options.local_size > 0) {
    local_rank = options.local_rank;
    local_size = options.local_size;
  } else {
    local_rank = hosts.local_rank_of(rank);
    local_size = hosts.ranks_on(hosts.host_of(rank));
  }

  auto mesh = transport::MeshOptions::from_settings(Settings::from_environment(), comm_id_);
  mesh.connect_timeout = timeout_;
  mesh.host_of_rank = hosts.host_of_rank;
  mesh.local_size = local_size;
  mesh.host_cores = hosts.cores_of_host[static_cast<std::size_t>(hosts.host_of(rank))];
  if (!options.job_token.empty()) mesh.job_token = options.job_token;
  transport_ = transport::connect_mesh(*store_, rank, size, mesh);  // CANOPY_TRANSPORT=tcp|verbs|auto

  bool calibrate = options.calibrate && env_value("CANOPY_CALIBRATE").value_or("1") != "0";
  collectives::LinkModel link;
  link.hosts = hosts;
  if (calibrate)
    link = collectives::calibrate_link_model(*transport_, *store_, comm_id_, hosts, Deadline::after(timeout_));
  cost_model_ = collectives::CostModel(std::move(link));
  log::info("communicator {} ready: rank {} of {} (local {} of {}), {}", comm_id_, rank, size, local_rank,
            local_size, collectives::describe(cost_model_.link()));

  auto liveness = collectives::LivenessSettings::from_environment(current_environment());
  auto monitor_store = collectives::open_monitor_store(store_, liveness);
  first_failure_.emplace(monitor_store, rank);
  if (liveness.enabled() && size > 1 && monitor_store)
    liveness_ = std::make_unique<collectives::LivenessMonitor>(
        monitor_store, *first_failure_, rank, size, liveness, [this](const std::string& why) { abort(why); });
}

void Communicator::Impl::ensure_usable() {
  std::lock_guard lock(failure_mutex_);
  if (!failure_.empty())
    fail(ErrorCode::Aborted, "rank {}: communicator is unusable after an earlier failure: {}", rank, failure_);
}

void Communicator::Impl::abort(const std::string& reason) {
  // Tell the other ranks before closing the sockets: whoever learns of this through them finds out why.
  if (first_failure_)
    first_failure_->blame(Error(ErrorCode::Aborted, fmt::format("rank {}: aborted: {}", rank, reason)));
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_.empty()) failure_ = reason;
  }
  transport_->abort(reason);
}

void Communicator::Impl::validate(const CollectiveArgs& args) const {
  if (is_rooted(args.collective) && (args.root < 0 || args.root >= size))
    fail(ErrorCode::InvalidArgument, "{}: root {} is not a rank of this group of {}", to_string(args.collective),
         args.root, size);
  if (args.count > 0 && (args.input == nullptr || args.output == nullptr))
    fail(ErrorCode::InvalidArgument, "{}: null buffer for {} elements", to_string(args.collective), args.count);
  if (args.op == ReduceOp::Avg && !is_reduction(args.collective)) return;
}

CollectiveCall Communicator::Impl::describe_call(const CollectiveArgs& args, const CollectiveOptions& options) const {
  std::size_t element_size = size_of(args.dtype);
  std::size_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes : chunk_bytes_;
  CollectiveCall call;
  call.collective = args.collective;
  call.rank = rank;
  call.size = size;
  call.count = args.collective == Collective::Barrier ? 0 : args.count;
  call.root = is_rooted(args.collective) ? args.root : 0;
  call.chunk_count = std::max<std::uint64_t>(1, chunk_bytes / element_size);
  return call;
}

// The algorithm asked for (the call's options, else CANOPY_ALGO); empty for auto.
std::string_view Communicator::Impl::requested_algorithm(Collective collective,
                                                         const CollectiveOptions& options) const {
  std::string_view name = options.algorithm;  // a view: no copy on every call
  if (name.empty())
    if (auto it = algorithm_overrides_.find(collective); it != algorithm_overrides_.end()) name = it->second;
  return name == "auto" ? std::string_view{} : name;
}

// Whether this call takes part in stream detection: a broadcast with data, its algorithm left to auto,
// over a transport whose frames carry the root's flag. Every rank answers alike.
bool Communicator::Impl::follows_stream(const CollectiveArgs& args, const CollectiveOptions& options) const {
  return args.collective == Collective::Broadcast && args.count > 0 &&
         requested_algorithm(args.collective, options).empty() && transport_->carries_frame_flags();
}

const Algorithm& Communicator::Impl::select(const CollectiveCall& call, std::size_t element_size,
                                            const CollectiveOptions& options, collectives::Pace pace,
                                            std::string* explanation) {
  const std::string_view name = requested_algorithm(call.collective, options);
  if (!name.empty()) {
    const Algorithm* algorithm = collectives::find_algorithm(call.collective, name);
    if (algorithm == nullptr) {
      std::string known;
      for (const Algorithm& a : collectives::algorithms(call.collective))
        known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
      fail(ErrorCode::InvalidArgument, "{} has no algorithm '{}' (known: {}, auto)", to_string(call.collective), name,
           known);
    }
    if (explanation) *explanation = fmt::format("{}: {} (asked for)", to_string(call.collective), name);
    return *algorithm;
  }
  const auto& choice = cost_model_.choose(call, element_size, pace);
  if (explanation) *explanation = choice.explanation;
  return *choice.algorithm;
}

// Nothing here copies the input: an out-of-place schedule reads it as Buffer::Input (its first send
// and first reduce of each block), and copies into Data only what its result needs and it never
// writes (see StepWriter).
Communicator::Impl::CallBuffers Communicator::Impl::prepare_data(const CollectiveArgs& args,
                                                                 std::size_t element_size) {
  auto* input = static_cast<const std::byte*>(args.input);
  auto* output = static_cast<std::byte*>(args.output);
  std::size_t bytes = args.count * element_size;
  switch (args.collective) {
    case Collective::AllReduce:
      return {output, input, input == output};
    case Collective::Broadcast:
      // Only the root's input is read; elsewhere Data is received whole.
      return {output, input, rank != args.root || input == output};
    case Collective::Reduce:
      if (rank == args.root) return {output, input, input == output};
      grow(scratch_, bytes);  // intermediate ranks accumulate partial sums: keep the caller's input intact
      return {scratch_.data(), input, false};
    case Collective::AllGather:
      return {output, input, input == output + rank * bytes};
    case Collective::ReduceScatter:
      grow(scratch_, bytes * size);  // the partial sums of every block, allocated once and reused
      return {scratch_.data(), input, false};
    default:
      return {output, input, true};
  }
}

void Communicator::Impl::finish_data(const CollectiveArgs& args, std::byte* data, std::size_t element_size) {
  std::size_t bytes = args.count * element_size;
  bool holds_result = args.collective == Collective::AllReduce || args.collective == Collective::ReduceScatter ||
                      (args.collective == Collective::Reduce && rank == args.root);
  if (args.collective == Collective::ReduceScatter && bytes > 0)
    std::memcpy(args.output, data + rank * bytes, bytes);
  if (args.op == ReduceOp::Avg && holds_result)
    collectives::finish_average(args.dtype, args.output, args.count, size);
}

void Communicator::Impl::run(const CollectiveArgs& args, const CollectiveOptions& options, std::uint64_t seq) {
  ensure_usable();
  validate(args);
  std::size_t element_size = size_of(args.dtype);
  CollectiveCall call = describe_call(args, options);
  const bool follows_stream = this->follows_stream(args, options);
  const collectives::Pace pace = follows_stream ? this->pace() : collectives::Pace::OneCall;
  std::string explanation;
  const Algorithm& algorithm =
      select(call, element_size, options, pace, log::level() <= log::Level::Info ? &explanation : nullptr);
  if (!explanation.empty()) log::info("#{} {}", seq, explanation);
  const CallBuffers buffers = prepare_data(args, element_size);
  call.in_place = buffers.in_place;
  const collectives::CompiledSchedule& compiled = schedules_.get(algorithm, call);
  grow(staging_, compiled.schedule.staging_count * element_size);

  collectives::ExecutionContext context;
  context.transport = transport_.get();
  context.envelope = {comm_id_,
                      seq,
                      args.collective,
                      args.dtype,
                      args.op,
                      collectives::algorithm_index(algorithm),
                      static_cast<std::uint32_t>(call.root),
                      call.count,
                      0};
  context.data = buffers.data;
  context.input = buffers.input;
  context.staging = staging_.data();
  context.element_size = element_size;
  context.dtype = args.dtype;
  context.op = args.op == ReduceOp::Avg ? ReduceOp::Sum : args.op;
  // One clock read at each end of the call serves the deadline, the flight recorder and stream detection:
  // on a small call each read is a measurable part of what this rank itself spends.
  const Clock::time_point started = Clock::now();
  context.deadline = Deadline(started + (options.timeout.count() > 0 ? options.timeout : timeout_));
  // The root calls back to back when its previous broadcast can still be on its way: sooner than one
  // call's predicted latency after it returned.
  bool back_to_back = false;
  if (follows_stream && rank == call.root && last_broadcast_end_) {
    const double since = std::chrono::duration<double>(started - *last_broadcast_end_).count();
    back_to_back =
        since < cost_model_.choose(call, element_size, collectives::Pace::OneCall).predicted_seconds;
  }
  context.frame_flags = back_to_back ? transport::kFlagRootInStream : 0;
  std::size_t slot = recorder_.start(
      {seq, args.collective, algorithm.name, args.count, args.dtype, args.op, call.root, {}, {}, 0}, started);
  try {
    executor_.run(compiled, context);
  } catch (const Error& e) {
    recorder_.finish(slot, false, Clock::now());
    Error blamed = first_failure_->blame(e);  // or the failure another rank saw first, which caused this one
    // Messages of the failed call may still be in flight: no later call could trust the stream.
    abort(blamed.what());
    if (blamed.code() != ErrorCode::Timeout) throw blamed;
    // A timeout says who was stuck where: this rank's recent calls, as every rank prints its own.
    throw Error(ErrorCode::Timeout,
                fmt::format("{}\nrank {}'s last collectives:{}", blamed.what(), rank, recorder_.dump()));
  }
  const Clock::time_point ended = Clock::now();
  recorder_.finish(slot, true, ended);
  if (follows_stream) {
    const bool root_in_stream =
        rank == call.root ? back_to_back : (executor_.heard_flags() & transport::kFlagRootInStream) != 0;
    in_stream_.store(root_in_stream, std::memory_order_relaxed);
    last_broadcast_end_ = ended;
  } else {
    in_stream_.store(false, std::memory_order_relaxed);
    last_broadcast_end_.reset();
  }
  finish_data(args, buffers.data, element_size);
}

void Communicator::Impl::send(std::span<const std::byte> data, int peer, std::uint32_t tag, bool is_send,
                              std::span<std::byte> out) {
  ensure_usable();
  if (peer < 0 || peer >= size || peer == rank)
    fail(ErrorCode::InvalidArgument, "rank {}: cannot {} rank {} in a group of {}", rank,
         is_send ? "send to" : "receive from", peer, size);
  transport::Envelope envelope;
  envelope.comm_id = comm_id_;
  envelope.collective = Collective::PointToPoint;
  envelope.root = tag;
  envelope.count = is_send ? data.size() : out.size();
  envelope.seq = is_send ? p2p_sent_[peer]++ : p2p_received_[peer]++;
  auto deadline = Deadline::after(timeout_);
  try {
    if (is_send)
      transport::send(*transport_, peer, envelope, data, deadline);
    else
      transport::recv(*transport_, peer, envelope, out, deadline);
  } catch (const Error& e) {
    Error blamed = first_failure_->blame(e);
    abort(blamed.what());
    throw blamed;
  }
}

// --- Communicator: the public face ---

namespace collectives {

EnvironmentGroup join_environment_group(const CommunicatorOptions& options) {
  Duration timeout = options.timeout.count() > 0 ? options.timeout : default_timeout();
  EnvironmentGroup joined{rendezvous::rendezvous(current_environment(), timeout), options};
  const rendezvous::LaunchInfo& info = joined.rendezvous.info;
  joined.options.timeout = timeout;
  if (joined.options.local_rank < 0) {
    joined.options.local_rank = info.local_rank;
    joined.options.local_size = info.local_world_size;
  }
  if (joined.options.job_token.empty()) joined.options.job_token = info.job_token;
  return joined;
}

}  // namespace collectives

Communicator Communicator::from_environment(const CommunicatorOptions& options) {
  auto joined = collectives::join_environment_group(options);
  const rendezvous::LaunchInfo& info = joined.rendezvous.info;
  Communicator communicator(joined.rendezvous.store, info.rank, info.world_size, joined.options);
  communicator.impl_->store_server = std::move(joined.rendezvous.server);
  return communicator;
}

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size, const CommunicatorOptions& options)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, options)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
int Communicator::local_rank() const { return impl_->local_rank; }
int Communicator::local_size() const { return impl_->local_size; }
std::string_view Communicator::transport_name() const { return impl_->transport_name(); }

void Communicator::run(const CollectiveArgs& args, const CollectiveOptions& options) {
  impl_->sequencer.run([&](std::uint64_t seq) { impl_->run(args, options, seq); });
}

Work Communicator::start(const CollectiveArgs& args, const CollectiveOptions& options) {
  impl_->validate(args);
  return impl_->sequencer.submit([impl = impl_.get(), args, options](std::uint64_t seq) { impl->run(args, options, seq); });
}

void Communicator::barrier(const CollectiveOptions& options) {
  run({Collective::Barrier, nullptr, nullptr, 0, DataType::UInt8, ReduceOp::Sum, 0}, options);
}

void Communicator::send(std::span<const std::byte> data, int peer, std::uint32_t tag) {
  impl_->sequencer.run([&](std::uint64_t) { impl_->send(data, peer, tag, true, {}); });
}

void Communicator::recv(std::span<std::byte> data, int peer, std::uint32_t tag) {
  impl_->sequencer.run([&](std::uint64_t) { impl_->send({}, peer, tag, false, data); });
}

void Communicator::abort(const std::string& reason) { impl_->abort(reason); }

Communicator::AlgorithmChoice Communicator::choose_algorithm(const CollectiveArgs& args,
                                                             const CollectiveOptions& options) const {
  AlgorithmChoice choice;
  CollectiveCall call = impl_->describe_call(args, options);
  const collectives::Pace pace =
      impl_->follows_stream(args, options) ? impl_->pace() : collectives::Pace::OneCall;
  const Algorithm& algorithm = impl_->select(call, size_of(args.dtype), options, pace, &choice.explanation);
  choice.name = algorithm.name;
  choice.predicted_seconds = impl_->predict(algorithm, call, size_of(args.dtype), pace);
  return choice;
}

Communicator::LinkEstimate Communicator::link_estimate() const {
  const auto& link = impl_->link();
  return {link.alpha, link.beta, link.gamma, link.beta_eager, link.eager_bytes, collectives::describe(link)};
}

void Communicator::check_blocks(std::size_t block, std::size_t whole, const char* what) const {
  if (whole != block * static_cast<std::size_t>(size()))
    fail(ErrorCode::InvalidArgument, "{} holds {} elements; {} ranks x {} = {} expected", what, whole, size(), block,
         block * static_cast<std::size_t>(size()));
}

}  // namespace canopy

// --- Issue 16 in progress: the group model's calls, declared; their implementations land with it ---

namespace canopy {
namespace {
[[noreturn]] void not_yet(const char* what) {
  fail(ErrorCode::InvalidArgument, "{} is not implemented yet", what);
}
}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
bool Communicator::valid() const { return impl_ != nullptr; }
Work Communicator::send_async(std::span<const std::byte>, int, std::uint32_t) { not_yet("send_async"); }
Work Communicator::recv_async(std::span<std::byte>, int, std::uint32_t) { not_yet("recv_async"); }
Communicator Communicator::split(int, int) { not_yet("split"); }
Communicator Communicator::subgroup(std::span<const int>) { not_yet("subgroup"); }
CollectiveArgs Communicator::all_to_all_args(const void*, void*, std::size_t, std::size_t, DataType) const {
  not_yet("all_to_all");
}
CollectiveArgs Communicator::all_to_all_v_args(const void*, std::size_t, std::span<const std::size_t>, void*,
                                               std::size_t, std::span<const std::size_t>, DataType) const {
  not_yet("all_to_all_v");
}
CollectiveArgs Communicator::gather_args(const void*, std::size_t, void*, std::size_t, int, DataType) const {
  not_yet("gather");
}
CollectiveArgs Communicator::scatter_args(const void*, std::size_t, void*, std::size_t, int, DataType) const {
  not_yet("scatter");
}

}  // namespace canopy
