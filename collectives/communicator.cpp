// The public face of a communicator: argument checks and the typed calls' untyped forms. What runs them
// is Communicator::Impl (communicator_impl.hpp).
#include "canopy/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "collectives/communicator_impl.hpp"
#include "collectives/forming/environment_group.hpp"
#include "collectives/forming/group_split.hpp"
#include "collectives/selection/link_model_text.hpp"
#include "common/error.hpp"

namespace canopy {

Communicator Communicator::from_environment(const CommunicatorOptions& options) {
  // The store is this communicator's first: its first request claims the rank (and names it), rendezvous()
  // need not.
  auto joined = collectives::join_environment_group(options, rendezvous::RankClaim::ByCaller);
  const rendezvous::LaunchInfo& info = joined.rendezvous.info;
  // A replacement started by canopy-run --elastic (CANOPY_ELASTIC_JOIN=1) waits for the running group to
  // grow; its rank there is the grow's to decide (the newcomers last), not the dead rank's it was given.
  if (info.elastic_join) return join(joined.rendezvous.store, joined.options);
  Communicator communicator(std::make_unique<Impl>(joined.rendezvous.store, info.rank, info.world_size,
                                                   joined.options, nullptr, nullptr, std::function<void()>{},
                                                   Impl::Formation::FirstOnItsStore));
  communicator.impl_->family()->store_server = std::move(joined.rendezvous.server);
  return communicator;
}

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size,
                           const CommunicatorOptions& options)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, options)) {}
Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

bool Communicator::valid() const {
  return impl_ != nullptr;
}

std::optional<Error> Communicator::failure() const {
  return impl().failure();
}

Communicator::Impl& Communicator::impl() const {
  if (!impl_)
    fail(ErrorCode::InvalidArgument,
         "this communicator is empty: this rank is not a member of the group it came from (split with a "
         "negative "
         "color, or subgroup without this rank), or it was moved from");
  return *impl_;
}

int Communicator::rank() const {
  return impl().rank;
}
int Communicator::size() const {
  return impl().size;
}
int Communicator::local_rank() const {
  return impl().local_rank;
}
int Communicator::local_size() const {
  return impl().local_size;
}
int Communicator::host_count() const {
  const collectives::HostLayout& layout = impl().hosts();
  if (layout.host_of_rank.empty()) return impl().size;  // every rank on a host of its own
  std::vector<int> hosts = layout.host_of_rank;
  std::sort(hosts.begin(), hosts.end());
  return static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
}
std::string_view Communicator::transport_name() const {
  return impl().transport_name();
}
std::uint64_t Communicator::store_requests_sent() const {
  return impl().store_requests_sent();
}

// Both entry points check the arguments once, on the caller's thread, before the call takes its turn.
void Communicator::run(const CollectiveArgs& args, const CollectiveOptions& options) {
  Impl& impl = this->impl();
  impl.engine().validate(args);
  impl.sequencer.run([&](std::uint64_t seq) { impl.run(args, options, seq); });
}

Work Communicator::start(const CollectiveArgs& args, const CollectiveOptions& options) {
  Impl& impl = this->impl();
  impl.engine().validate(args);
  return impl.sequencer.submit(
      [impl = &impl, args, options](std::uint64_t seq) { impl->run(args, options, seq); });
}

void Communicator::barrier(const CollectiveOptions& options) {
  run({Collective::Barrier, nullptr, nullptr, 0, DataType::UInt8, ReduceOp::Sum, 0}, options);
}

void Communicator::send(std::span<const std::byte> data, int peer, std::uint32_t tag) {
  impl().send(data, peer, tag).wait();
}
void Communicator::recv(std::span<std::byte> data, int peer, std::uint32_t tag) {
  impl().recv(data, peer, tag).wait();
}
Work Communicator::send_async(std::span<const std::byte> data, int peer, std::uint32_t tag) {
  return impl().send(data, peer, tag);
}
Work Communicator::recv_async(std::span<std::byte> data, int peer, std::uint32_t tag) {
  return impl().recv(data, peer, tag);
}
int Communicator::recv_any(std::span<std::byte> data, std::uint32_t tag) {
  int source = -1;
  impl().recv_any(data, source, tag).wait();
  return source;
}
Work Communicator::recv_any_async(std::span<std::byte> data, int& source, std::uint32_t tag) {
  return impl().recv_any(data, source, tag);
}

// Every rank tells the others what it asks for through the group itself (an all-gather, ordered and
// checked like any collective); each group then connects among its own members. The all-gather's
// sequence number names the new groups' store keys: every rank calls split in the same place.
Communicator Communicator::split_by(const collectives::SplitRequest& request, std::string_view what) {
  Impl& impl = this->impl();
  const collectives::SplitRequest mine = request;
  std::vector<collectives::SplitRequest> all(static_cast<std::size_t>(impl.size));
  static_assert(sizeof(collectives::SplitRequest) == 3 * sizeof(std::int32_t));
  std::uint64_t split_seq = 0;
  impl.sequencer.run([&](std::uint64_t seq) {
    split_seq = seq;
    impl.run({Collective::AllGather, &mine, all.data(), 3, DataType::Int32, ReduceOp::Sum, 0}, {}, seq);
  });
  const std::vector<int> members = collectives::split_members(all, impl.rank);
  if (members.empty()) return Communicator(std::unique_ptr<Impl>());
  return Communicator(
      std::make_unique<Impl>(impl, members, fmt::format("{}/{}/{}", what, split_seq, all[impl.rank].color)));
}

Communicator Communicator::split(int color, int key) {
  return split_by({color < 0 ? -1 : color, key, 0}, "split");
}

Communicator Communicator::subgroup(std::span<const int> ranks) {
  return split_by(collectives::subgroup_request(ranks, impl().rank, impl().size), "subgroup");
}

Communicator Communicator::create_group(std::span<const int> ranks, std::string_view name) {
  Impl& impl = this->impl();
  const collectives::SplitRequest request = collectives::subgroup_request(ranks, impl.rank, impl.size);
  if (request.color < 0)
    fail(ErrorCode::InvalidArgument, "create_group '{}' {}: rank {} is not listed; only the members call it",
         name, collectives::describe_ranks(ranks), impl.rank);
  return Communicator(std::make_unique<Impl>(impl, std::vector<int>(ranks.begin(), ranks.end()),
                                             fmt::format("group/{}", name), request.list));
}

void Communicator::abort(const std::string& reason) {
  impl().abort(reason);
}

Communicator::AlgorithmChoice Communicator::choose_algorithm(const CollectiveArgs& args,
                                                             const CollectiveOptions& options) const {
  Impl& impl = this->impl();
  AlgorithmChoice choice;
  collectives::CollectiveCall call;
  collectives::CallEngine& engine = impl.engine();
  engine.describe_call(args, options, call);
  const std::string_view requested = engine.requested_algorithm(args.collective, options);
  const collectives::Pace pace = engine.pace(engine.follows_stream(args, requested));
  const collectives::Algorithm& algorithm =
      engine.select(call, size_of(args.dtype), requested, pace, &choice.explanation, /*remember=*/false);
  choice.name = algorithm.name;
  choice.predicted_seconds = engine.predict(algorithm, call, size_of(args.dtype), pace);
  return choice;
}

Communicator::LinkEstimate Communicator::link_estimate() const {
  const auto& link = impl().link();
  const auto& within = link.within_host;
  return {within.alpha,
          within.beta,
          link.gamma,
          within.beta_eager,
          within.eager_bytes,
          link.between_hosts.alpha,
          link.between_hosts.beta,
          collectives::describe(link, impl().hosts())};
}

void Communicator::check_blocks(std::size_t block, std::size_t whole, const char* what) const {
  if (whole != block * static_cast<std::size_t>(size()))
    fail(ErrorCode::InvalidArgument, "{} holds {} elements; {} ranks x {} = {} expected", what, whole, size(),
         block, block * static_cast<std::size_t>(size()));
}

CollectiveArgs Communicator::all_to_all_args(const void* input, void* output, std::size_t input_count,
                                             std::size_t output_count, DataType dtype) const {
  const auto p = static_cast<std::size_t>(size());
  if (input_count % p != 0)
    fail(ErrorCode::InvalidArgument, "all_to_all: the input's {} elements are not {} equal blocks",
         input_count, p);
  check_blocks(input_count / p, output_count, "all_to_all: output");
  return {Collective::AllToAll, input, output, input_count / p, dtype, ReduceOp::Sum, 0};
}

CollectiveArgs Communicator::all_to_all_v_args(const void* input, std::size_t input_count,
                                               std::span<const std::size_t> send_counts, void* output,
                                               std::size_t output_count,
                                               std::span<const std::size_t> recv_counts,
                                               DataType dtype) const {
  const auto p = static_cast<std::size_t>(size());
  if (send_counts.size() != p || recv_counts.size() != p)
    fail(ErrorCode::InvalidArgument, "all_to_all_v: {} send counts and {} receive counts for {} ranks",
         send_counts.size(), recv_counts.size(), p);
  const std::size_t sent = std::accumulate(send_counts.begin(), send_counts.end(), std::size_t{0});
  const std::size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0});
  if (sent != input_count || received != output_count)
    fail(ErrorCode::InvalidArgument,
         "all_to_all_v: the send counts add up to {} and the receive counts to {}, but input holds {} "
         "elements and "
         "output {}",
         sent, received, input_count, output_count);
  const auto r = static_cast<std::size_t>(rank());
  if (send_counts[r] != recv_counts[r])
    fail(ErrorCode::InvalidArgument, "all_to_all_v: rank {} sends itself {} elements but receives {}", r,
         send_counts[r], recv_counts[r]);
  CollectiveArgs args{Collective::AllToAllV, input, output, 0, dtype, ReduceOp::Sum, 0};
  args.send_counts = send_counts.data();
  args.recv_counts = recv_counts.data();
  return args;
}

CollectiveArgs Communicator::gather_args(const void* input, std::size_t input_count, void* output,
                                         std::size_t output_count, int root, DataType dtype) const {
  if (rank() == root) check_blocks(input_count, output_count, "gather: the root's output");
  return {Collective::Gather, input, output, input_count, dtype, ReduceOp::Sum, root};
}

CollectiveArgs Communicator::scatter_args(const void* input, std::size_t input_count, void* output,
                                          std::size_t output_count, int root, DataType dtype) const {
  if (rank() == root) check_blocks(output_count, input_count, "scatter: the root's input");
  return {Collective::Scatter, input, output, output_count, dtype, ReduceOp::Sum, root};
}

}  // namespace canopy
