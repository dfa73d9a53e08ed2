#include "collectives/communicator_impl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "collectives/elastic/liveness_keys.hpp"
#include "collectives/elastic/liveness_monitor.hpp"
#include "collectives/elastic/watched_store.hpp"
#include "collectives/forming/host_layout_exchange.hpp"
#include "collectives/forming/record_cache.hpp"
#include "collectives/selection/link_calibration.hpp"
#include "collectives/selection/link_model_text.hpp"
#include "common/cpu_list.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/fnv1a.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "common/settings.hpp"
#include "rendezvous/bootstrap.hpp"
#include "transport/frame.hpp"
#include "transport/select_transport.hpp"
#include "transport/shm/unix_listener_book.hpp"

namespace canopy {

using collectives::Algorithm;
using collectives::CollectiveCall;

namespace {

// A sub-communicator's id: a digest of its store keys' prefix (unique in the job), its top bit set so
// that it never meets the small numbers of the communicators formed on the store directly.
std::uint64_t child_id(std::uint64_t parent_id, const std::string& name) {
  return fnv1a64(name, parent_id) | (std::uint64_t{1} << 63);
}

// Names this process under a new family's liveness keys before its group forms, where its monitor names
// it only once its thread runs: a member of a shrunk or grown group that dies while the group forms, or
// just after, is then found gone at once by the others on its host (peer_silence.hpp), not after the
// heartbeat timeout.
void name_this_process(Store& family_store, int rank) {
  if (const std::string identity = this_process_identity(); !identity.empty())
    family_store.set(collectives::process_key(rank), identity);
}

}  // namespace

Communicator::Impl::Impl(std::shared_ptr<Store> base_store, int rank_, int size_,
                         const CommunicatorOptions& options, const collectives::GrowPlan* plan,
                         const Impl* member, const std::function<void()>& check_members, Formation formation)
    : rank(rank_),
      size(size_),
      family_(std::make_shared<collectives::CommunicatorFamily>()),
      settings_(collectives::CommunicatorSettings::from(Settings::from_environment())),
      timeout_(options.timeout.count() > 0 ? options.timeout : settings_.timeout),
      options_(options) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "rank {} is not within a group of {} ranks", rank, size);
  log::set_rank(rank);
  // Each rank numbers the communicators it forms on this store; ranks form them in the same order,
  // so the numbers agree, and the keys and handshakes of one communicator never meet another's. A grown
  // group's id and keys come from its plan, the same on every rank, newcomers included. The first on a
  // store of its own is number 0 (the counter starts at 1), and its record claims the rank: a second
  // process with this rank meets it there, as it would meet the claim rendezvous() makes.
  const bool first_on_its_store = !plan && formation == Formation::FirstOnItsStore;
  comm_id_ =
      plan ? plan->comm_id
      : first_on_its_store
          ? 0
          : static_cast<std::uint64_t>(base_store->add(fmt::format("canopy/communicators/{}", rank), 1));
  base_store_ = base_store;
  store_path_ = plan ? plan->prefix : fmt::format("canopy/comm/{}", comm_id_);
  store_ = std::make_shared<PrefixStore>(base_store, store_path_);
  store_->set_timeout(timeout_);
  if (plan) name_this_process(*store_, rank);

  world_ranks_.resize(static_cast<std::size_t>(size));
  std::iota(world_ranks_.begin(), world_ranks_.end(), 0);
  family_ranks_ = world_ranks_;
  next_world_rank_ = size;
  if (plan) {
    world_ranks_ = plan->world_ranks;
    generation_ = plan->generation;
    admitted_ = plan->admitted;
    next_world_rank_ = *std::max_element(world_ranks_.begin(), world_ranks_.end()) + 1;
  }
  if (member) family_->store_server = member->family_->store_server;
  // Both TCP meshes (the collectives' and the point-to-point one) share the rank's one listener, made
  // before the layout is agreed (or kept from the group a survivor leaves), so that its address travels in
  // this rank's layout record: one request publishes all it has to say. Not where the transport is verbs,
  // which has no TCP links (under auto with verbs between hosts, TCP is the rings' fallback within one).
  const transport::TransportKind kind = settings_.mesh.settings.kind;
  const auto records = std::make_shared<collectives::RecordCache>(store_);
  if (size > 1 && kind != transport::TransportKind::Verbs) {
    const transport::TcpOptions tcp = transport::TcpOptions::from(mesh_options());
    tcp_addresses_ = std::make_shared<transport::TcpAddressBook>(
        rank, size, /*meshes=*/2, tcp,
        transport::TcpAddressBook::Records{records, collectives::rank_record_key,
                                           collectives::addresses_in_record},
        member && member->tcp_addresses_ ? member->tcp_addresses_->listener() : nullptr);
  }
  // Both meshes' Unix listeners too, where the ranks of a host may share memory: their names travel in the
  // record, and the host's ranks need not agree on them through the store. Not where members are watched
  // while the group forms (a grow): only the store's waits notice a member gone, not a socket's.
  std::shared_ptr<transport::UnixListenerBook> listeners;
  if (size > 1 && !check_members &&
      (kind == transport::TransportKind::Auto || kind == transport::TransportKind::ShmTcp))
    listeners = std::make_shared<transport::UnixListenerBook>(
        rank, size, /*meshes=*/2,
        transport::UnixListenerBook::Records{records, collectives::rank_record_key,
                                             collectives::listeners_in_record});
  collectives::RankRecord record;
  if (tcp_addresses_) record.addresses = tcp_addresses_->address();
  if (listeners) record.listeners = listeners->part();
  if (first_on_its_store) record.claim = rendezvous::rank_claim();
  // Under auto whether this rank can use verbs travels in its record too: the group's verdict comes back
  // with the layout, at no request of its own.
  if (kind == transport::TransportKind::Auto) {
    const std::string why_not =
        transport::verbs_unavailable_reason(transport::VerbsOptions::from(mesh_options()));
    record.verbs = why_not.empty() ? "1" : "0" + why_not;
  }
  const collectives::LivenessSettings& liveness = settings_.liveness;
  const std::shared_ptr<Store> forming =
      check_members ? std::make_shared<collectives::WatchedStore>(
                          store_, check_members, std::clamp(liveness.interval, Duration(50), Duration(1000)))
                    : store_;
  // Where this rank's host may share memory, the records of the ranks its launcher says are there (a host's
  // ranks numbered one after another, as canopy-run, torchrun and SLURM's block distribution do) come in the
  // same request as the layout: a guess that the layout checks, costing a request only where it is wrong.
  std::vector<std::string> likely_on_this_host;
  const int first_here = rank - options.local_rank;
  if (listeners && options.local_rank >= 0 && options.local_size > 1 &&
      transport::host_may_share_memory(kind, options.local_size, settings_.mesh.settings))
    for (int r = std::max(0, first_here); r < std::min(size, first_here + options.local_size); ++r)
      if (r != rank) likely_on_this_host.push_back(collectives::rank_record_key(r));
  collectives::LayoutAgreement agreed =
      collectives::exchange_host_layout(*forming, rank, size, rendezvous::host_identity(settings_.host_id),
                                        allowed_cpus(), record, likely_on_this_host);
  for (std::size_t i = 0; i < agreed.also_read.size(); ++i)
    records->learn(likely_on_this_host[i], std::move(agreed.also_read[i]));
  hosts_ = std::make_shared<const collectives::HostLayout>(std::move(agreed.layout));
  verbs_verdict_ = std::move(agreed.verbs_verdict);
  if (options.local_rank >= 0 && options.local_size > 0) {
    local_rank = options.local_rank;
    local_size = options.local_size;
  } else {
    local_rank = hosts_->local_rank_of(rank);
    local_size = hosts_->ranks_on(hosts_->host_of(rank));
  }
  read_records_at_once(*records, agreed.records, kind, tcp_addresses_ != nullptr, listeners != nullptr);
  connect(*hosts_, options.job_token, forming, std::move(listeners));

  const bool calibrate = !plan && options.calibrate && settings_.calibrate;
  collectives::LinkModel link = plan ? plan->link : collectives::LinkModel();
  // The probe runs once every rank is connected, so only load can slow it: a group given a short timeout
  // for its calls (torch's tests give 1 s) must not fail to form because the machine is busy.
  constexpr Duration kShortestProbeDeadline = std::chrono::seconds(30);
  if (calibrate)
    link = collectives::calibrate_link_model(*transport_, *store_, comm_id_, *hosts_, settings_.cost_model,
                                             Deadline::after(std::max(timeout_, kShortestProbeDeadline)));
  start_engine(std::move(link));
  log::info("communicator {} ready: rank {} of {} (local {} of {}, generation {}), {}", comm_id_, rank, size,
            local_rank, local_size, generation_, collectives::describe(this->link(), *hosts_));

  auto monitor_store = collectives::open_monitor_store(store_, liveness);
  family_->failure_store = monitor_store;
  failure_store_ = monitor_store;
  first_failure_ = std::make_shared<collectives::FirstFailure>(monitor_store, rank);
  family_->join(this);
  if (liveness.enabled() && size > 1 && monitor_store)
    family_->watch(monitor_store, first_failure_, rank, size, liveness, base_store_);
}

Communicator::Impl::Impl(Impl& parent, const std::vector<int>& members, const std::string& name,
                         std::int32_t members_digest, const Origin& origin)
    : size(static_cast<int>(members.size())),
      family_(origin.new_family ? std::make_shared<collectives::CommunicatorFamily>() : parent.family_),
      settings_(parent.settings_),
      timeout_(parent.timeout_),
      comm_id_(child_id(parent.comm_id_, name)),
      options_(parent.options_),
      hosts_(std::make_shared<const collectives::HostLayout>(parent.hosts_->subset(members))) {
  rank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  if (rank >= size)
    fail(ErrorCode::InvalidArgument, "rank {} is not a member of the group it forms", parent.rank);
  for (int member : members) {
    world_ranks_.push_back(parent.world_ranks_[static_cast<std::size_t>(member)]);
    family_ranks_.push_back(parent.family_ranks_[static_cast<std::size_t>(member)]);
  }
  generation_ = parent.generation_;
  base_store_ = parent.base_store_;
  store_path_ = parent.store_path_ + "/" + name;
  admitted_ = parent.admitted_;
  next_world_rank_ = parent.next_world_rank_;
  local_rank = hosts_->local_rank_of(rank);
  local_size = hosts_->ranks_on(hosts_->host_of(rank));
  store_ = std::make_shared<PrefixStore>(parent.store_, name);
  store_->set_timeout(timeout_);
  if (origin.new_family) name_this_process(*store_, rank);
  // Where every rank of the parent can use verbs, so can every member; otherwise the members agree anew.
  if (parent.verbs_verdict_ == "1") verbs_verdict_ = parent.verbs_verdict_;
  if (members_digest != 0) {
    // The first member to arrive records its list; a member with another list would wait for peers that
    // never come.
    const std::string mine = std::to_string(members_digest);
    if (store_->compare_set("members", "", mine) != mine)
      fail(ErrorCode::Mismatch,
           "rank {} (world rank {}): the members of group '{}' passed different lists of ranks", rank,
           world_ranks_[static_cast<std::size_t>(rank)], name);
  }
  // The parent's listener and records: forming the group listens, publishes and reads nothing of its own.
  if (parent.tcp_addresses_)
    tcp_addresses_ = std::make_shared<transport::TcpAddressBook>(parent.tcp_addresses_, members);
  connect(*hosts_, options_.job_token,
          origin.check_members
              ? std::make_shared<collectives::WatchedStore>(store_, origin.check_members, origin.check_every)
              : store_);
  // The parent measured these links; the group's own layout (in its calls) decides who shares a host.
  start_engine(parent.link());
  if (origin.new_family) {
    // The first of a family: its ranks beat under its own keys, and its failures are its own.
    ++generation_;
    std::iota(family_ranks_.begin(), family_ranks_.end(), 0);
    family_->store_server = parent.family_->store_server;
    const collectives::LivenessSettings& liveness = settings_.liveness;
    failure_store_ = collectives::open_monitor_store(store_, liveness);
    family_->failure_store = failure_store_;
    first_failure_ = std::make_shared<collectives::FirstFailure>(failure_store_, rank);
    family_->join(this);
    if (liveness.enabled() && size > 1 && failure_store_)
      family_->watch(failure_store_, first_failure_, rank, size, liveness, base_store_);
  } else {
    path_ = parent.path_.empty() ? name : parent.path_ + "/" + name;
    if (family_->failure_store) failure_store_ = std::make_shared<PrefixStore>(family_->failure_store, path_);
    first_failure_ = std::make_shared<collectives::FirstFailure>(failure_store_, rank);
    family_->join(this);
  }
  log::info("{} ready: rank {} of {} (rank {} of its parent {})", describe(), rank, size, parent.rank,
            parent.describe());
}

collectives::GrowPlan Communicator::Impl::grow_plan(const std::vector<int>& members, std::uint64_t number,
                                                    std::uint64_t first_ticket,
                                                    std::uint64_t admitted) const {
  collectives::GrowPlan plan;
  const std::string name = fmt::format("grow/{}", number);
  plan.prefix = store_path_ + "/" + name;
  plan.comm_id = child_id(comm_id_, name);
  plan.generation = generation_ + 1;
  plan.first_newcomer = static_cast<int>(members.size());
  plan.first_ticket = first_ticket;
  plan.admitted = std::max(admitted, first_ticket - 1);
  const auto newcomers = static_cast<int>(plan.admitted - (first_ticket - 1));
  plan.size = plan.first_newcomer + newcomers;
  for (int member : members) plan.world_ranks.push_back(world_ranks_[static_cast<std::size_t>(member)]);
  for (int i = 0; i < newcomers; ++i) plan.world_ranks.push_back(next_world_rank_ + i);
  plan.link = link();
  return plan;
}

Communicator::Impl::~Impl() {
  family_->leave(this);  // before anything the family's monitor could abort goes
  sequencer.stop();      // runs what is queued; the progress thread may still report a failure through this
  p2p_->close();         // communicator until then, from a collective or from point-to-point
}

void Communicator::Impl::read_records_at_once(collectives::RecordCache& records,
                                              const std::vector<std::string>& gathered,
                                              transport::TransportKind kind, bool tcp_addresses,
                                              bool unix_listeners) {
  for (std::size_t r = 0; r < gathered.size(); ++r)
    records.learn(collectives::rank_record_key(static_cast<int>(r)), gathered[r]);
  if (!gathered.empty()) return;  // rank 0: every record, from the layout's gathering
  const int host = hosts_->host_of(rank);
  const int host_ranks = hosts_->ranks_on(host);
  // As connect_mesh decides (select_transport.cpp), whatever links join the hosts.
  const bool shares_memory = unix_listeners && host_ranks > 1 &&
                             transport::host_may_share_memory(kind, host_ranks, settings_.mesh.settings);
  const bool every_link_now = tcp_addresses && settings_.connect_eagerly;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r)
    if (r != rank && ((every_link_now && r < rank) || (shares_memory && hosts_->host_of(r) == host)))
      keys.push_back(collectives::rank_record_key(r));
  if (!keys.empty()) records.get_many(keys, timeout_);
}

void Communicator::Impl::connect(const collectives::HostLayout& hosts, const std::string& job_token,
                                 const std::shared_ptr<Store>& forming,
                                 std::shared_ptr<transport::UnixListenerBook> listeners) {
  transport::MeshOptions mesh = mesh_options();
  mesh.tcp_address_book = tcp_addresses_;
  mesh.tcp_address_book_mesh = 0;
  mesh.unix_listener_book = listeners;
  mesh.unix_listener_book_mesh = 0;
  mesh.connect_timeout = timeout_;
  if (!job_token.empty()) mesh.job_token = job_token;
  mesh.host_of_rank = hosts.host_of_rank;
  mesh.local_size = local_size;  // whether its ranks fit on this host's cores decides if the transport spins
  mesh.host_cores = hosts.cores_of_host.empty() ? 0 : hosts.cores_of(hosts.host_of(rank));
  mesh.verbs_verdict = verbs_verdict_;
  const bool on_first_use = !settings_.connect_eagerly;
  if (on_first_use) mesh.store_for_first_use = store_;
  const transport::TransportKind kind = settings_.mesh.settings.kind;
  transport_ =
      transport::connect_mesh(*forming, rank, size, mesh, kind);  // CANOPY_TRANSPORT=auto|shm+tcp|tcp|verbs
  // Point-to-point messages get a mesh of their own, in an order of their own, driven by the progress
  // thread beside the asynchronous collectives (docs/GROUPS.md says why not the collectives' sockets).
  auto p2p_store = std::make_shared<PrefixStore>(store_, "p2p");
  mesh.spin = false;        // the progress thread waits in poll(): no core spent on waiting
  mesh.host_cells = false;  // collectives only
  mesh.tcp_address_book_mesh = 1;
  mesh.unix_listener_book_mesh = 1;
  if (on_first_use) mesh.store_for_first_use = p2p_store;
  collectives::PointToPoint::Settings settings;
  settings.comm_id = comm_id_;
  settings.timeout = timeout_;
  // Of the kind the collectives' mesh took: under auto the group agreed on verbs or not once already.
  const transport::TransportKind p2p_kind = transport::kind_taken(kind, *transport_);
  PrefixStore p2p_forming(forming, "p2p");
  auto p2p_mesh = transport::connect_mesh(
      p2p_forming, rank, size, mesh, p2p_kind,
      kind == transport::TransportKind::Auto ? "CANOPY_TRANSPORT=auto, as the collectives' mesh chose" : "");
  p2p_ = std::make_unique<collectives::PointToPoint>(
      std::move(p2p_mesh), settings, [this](const Error& error) { return end_with(error); }, sequencer);
  sequencer.keep_moving(*p2p_, *transport_);
}

transport::MeshOptions Communicator::Impl::mesh_options() const {
  transport::MeshOptions mesh = settings_.mesh;
  mesh.comm_id = comm_id_;
  return mesh;
}

void Communicator::Impl::start_engine(collectives::LinkModel link) {
  engine_ = std::make_unique<collectives::CallEngine>(collectives::CallEngineSetup{
      rank, size, comm_id_, timeout_, hosts_, transport_.get(),
      collectives::CostModel(std::move(link), collectives::ChoiceMemo::for_group(size, local_size)),
      settings_.algorithm_overrides, settings_.chunk_bytes});
}

std::string Communicator::Impl::describe() const {
  return fmt::format("communicator {} (generation {})", comm_id_, generation_);
}

void Communicator::Impl::ensure_usable() {
  if (!failed_.load(std::memory_order_acquire)) return;
  if (std::optional<Error> refusal = failure()) throw *refusal;
}

std::optional<Error> Communicator::Impl::failure() {
  std::lock_guard lock(failure_mutex_);
  if (failure_.empty()) return std::nullopt;
  if (failure_code_ == ErrorCode::Revoked)
    return Error(ErrorCode::Revoked,
                 fmt::format("rank {}: {} is revoked; shrink() it to go on: {}", rank, describe(), failure_));
  // The first failure's own code (PeerFailed, Timeout, Mismatch, Aborted...): a program deciding whether to
  // shrink learns the same from a later call as from the call that failed.
  return Error(failure_code_,
               fmt::format("rank {}: communicator is unusable after an earlier failure: {}", rank, failure_));
}

void Communicator::Impl::abort(const std::string& reason) {
  end(ErrorCode::Aborted, reason);
}

void Communicator::Impl::end(ErrorCode code, const std::string& reason, bool publish) {
  // Tell the other ranks before closing the sockets: whoever learns of this through them finds out why.
  if (first_failure_ && publish) {
    const std::string lead = fmt::format("rank {}: ", rank);
    const bool led = reason.rfind(lead, 0) == 0;  // a monitor's reason already says whose it is
    first_failure_->blame(Error(code, code != ErrorCode::Revoked ? lead + "aborted: " + reason
                                      : led                      ? reason
                                                                 : lead + reason));
  }
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_.empty()) {
      failure_ = reason;
      failure_code_ = code;
    } else if (code == ErrorCode::Revoked) {
      failure_code_ = code;  // a revoke after a failure: later calls say revoked, as they do elsewhere
    }
    failed_.store(true, std::memory_order_release);
  }
  transport_->abort(reason);
  if (p2p_) p2p_->abort(reason);
}

void Communicator::Impl::revoke(const std::string& reason) {
  const std::string why = fmt::format("revoked {}: {}", describe(), reason);
  end(ErrorCode::Revoked, why);
  // Its sub-communicators here; elsewhere the family's monitors revoke them when they read the record.
  family_->revoke_descendants(*this, fmt::format("revoked with its parent, which rank {} {}", rank, why));
}

bool Communicator::Impl::descends_from(const Impl& ancestor) const {
  if (this == &ancestor || family_ != ancestor.family_) return false;
  return ancestor.path_.empty() || path_.rfind(ancestor.path_ + "/", 0) == 0;
}

Error Communicator::Impl::with_world_ranks(const Error& error) const {
  const bool sub_communicator = (comm_id_ >> 63) != 0;  // see child_id()
  if (!sub_communicator) return error;
  const std::string which = generation_ == 0 ? std::string("sub-communicator")
                                             : fmt::format("communicator (generation {})", generation_);
  constexpr int kListed = 16;
  std::string ranks;
  for (int r = 0; r < std::min(size, kListed); ++r)
    ranks +=
        fmt::format("{}{} = world rank {}", r == 0 ? "" : ", ", r, world_ranks_[static_cast<std::size_t>(r)]);
  if (size > kListed) ranks += ", ...";
  return Error(error.code(), fmt::format("{} [ranks of this {}: {}]", error.what(), which, ranks));
}

Error Communicator::Impl::end_with(const Error& error) {
  // Or the failure another rank saw first, which caused this one.
  Error blamed = first_failure_ ? first_failure_->blame(with_world_ranks(error)) : error;
  // In-flight messages: no later call could trust the stream. Published once, above, never waited on twice.
  end(blamed.code(), blamed.what(), /*publish=*/false);
  return blamed;
}

void Communicator::Impl::run(const CollectiveArgs& args, const CollectiveOptions& options,
                             std::uint64_t seq) {
  ensure_usable();
  try {
    engine_->run(args, options, seq);
  } catch (const collectives::CallFailed& failed) {
    Error blamed = end_with(failed.error);
    bool revoked = blamed.code() == ErrorCode::Revoked;
    {
      std::lock_guard lock(failure_mutex_);
      revoked = revoked || failure_code_ == ErrorCode::Revoked;  // learnt here, though the store was not
    }
    if (revoked)
      throw Error(ErrorCode::Revoked,
                  fmt::format("rank {}: {} #{} on {} was revoked: {}", rank, to_string(args.collective), seq,
                              describe(), blamed.what()));
    if (blamed.code() != ErrorCode::Timeout) throw blamed;
    // A timeout says who was stuck where: this rank's recent calls, as every rank prints its own.
    throw Error(ErrorCode::Timeout, fmt::format("{}\nrank {}'s last collectives:{}", blamed.what(), rank,
                                                engine_->recent_calls()));
  }
}

Work Communicator::Impl::send(std::span<const std::byte> data, int peer, std::uint32_t tag) {
  ensure_usable();
  return p2p_->send(data, peer, tag);
}

Work Communicator::Impl::recv(std::span<std::byte> data, int peer, std::uint32_t tag) {
  ensure_usable();
  return p2p_->recv(data, peer, tag);
}

Work Communicator::Impl::recv_any(std::span<std::byte> data, int& source, std::uint32_t tag) {
  ensure_usable();
  return p2p_->recv_any(data, source, tag);
}

}  // namespace canopy
