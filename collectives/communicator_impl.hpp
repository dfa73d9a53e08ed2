// What a Communicator is behind its pointer: the group's identity and lineage (ids, generation, world
// ranks, store keys), its links, and the failure state every call checks; its calls run in its CallEngine
// (call_engine.hpp), its point-to-point messages in p2p/point_to_point.hpp. communicator_impl.cpp forms
// groups, elastic/ shrinks and grows them, communicator.cpp is the public face.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/communicator.hpp"
#include "collectives/call_engine.hpp"
#include "collectives/call_sequencer.hpp"
#include "collectives/communicator_settings.hpp"
#include "collectives/elastic/communicator_family.hpp"
#include "collectives/elastic/fault_agreement.hpp"
#include "collectives/elastic/first_failure.hpp"
#include "collectives/elastic/grow_plan.hpp"
#include "collectives/forming/record_cache.hpp"
#include "collectives/p2p/point_to_point.hpp"
#include "transport/select_transport.hpp"
#include "transport/shm/unix_listener_book.hpp"
#include "transport/tcp/tcp_address_book.hpp"
#include "transport/transport.hpp"

namespace canopy {

namespace collectives {
// How a sub-communicator comes to be: from split and its kin, in the parent's family; from shrink, as
// the first of a family of its own (its own failure record and liveness monitor, one generation after
// the parent's), formed through a store whose waits give up once `check_members` finds a member gone.
struct GroupOrigin {
  bool new_family = false;
  std::function<void()> check_members;  // throws Error(PeerFailed) naming a member that is gone
  Duration check_every{100};
};
}  // namespace collectives

class Communicator::Impl {
 public:
  // How the first communicator of a family meets: on a store that others may share (SharedStore: numbered
  // by a counter in the store, so that a rank's communicators on one store never meet), or as the first
  // communicator on a store just reached by rendezvous(..., RankClaim::ByCaller) (FirstOnItsStore:
  // Communicator::from_environment), which is number 0 without a request and whose record claims the rank.
  enum class Formation { SharedStore, FirstOnItsStore };
  // The first communicator of a family: forms the group of `size` ranks meeting through `store`. With a
  // `plan`, the group that grow() forms (its id, keys, job ranks and link figures from the plan);
  // `member` is this rank's communicator in the group that grows (null on a newcomer), and
  // `check_members` (when set) gives up the forming's waits once a rank it waits for is gone.
  Impl(std::shared_ptr<Store> base_store, int rank, int size, const CommunicatorOptions& options,
       const collectives::GrowPlan* plan = nullptr, const Impl* member = nullptr,
       const std::function<void()>& check_members = {}, Formation formation = Formation::SharedStore);
  // A sub-communicator of `parent` made of `members` (ranks of the parent, in their new order), which
  // contains the parent's own rank; `name` tells its store keys from those of the parent's other
  // sub-communicators. Every member calls this with the same members and name; a nonzero
  // `members_digest` is first checked against the other members' (Error(Mismatch) where they differ).
  using Origin = collectives::GroupOrigin;
  Impl(Impl& parent, const std::vector<int>& members, const std::string& name,
       std::int32_t members_digest = 0, const Origin& origin = {});
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void run(const CollectiveArgs& args, const CollectiveOptions& options, std::uint64_t seq);
  Work send(std::span<const std::byte> data, int peer, std::uint32_t tag);
  Work recv(std::span<std::byte> data, int peer, std::uint32_t tag);
  Work recv_any(std::span<std::byte> data, int& source, std::uint32_t tag);
  // Describing, choosing and running calls (communicator.cpp's choose_algorithm asks it too).
  collectives::CallEngine& engine() { return *engine_; }
  void abort(const std::string& reason);
  // Ends this communicator for every member: the record in the store says revoked, and this rank's
  // sub-communicators are revoked with it (docs/RELIABILITY.md, *Revoke, agree, shrink*).
  void revoke(const std::string& reason);
  // Ends this communicator on this rank with `code` (Aborted, Revoked, or what failed), publishing
  // `reason` first unless another failure is there (or `publish` is false: it was, by the caller).
  // Callable from any thread, more than once.
  void end(ErrorCode code, const std::string& reason, bool publish = true);
  bool descends_from(const Impl& ancestor) const;
  // One fault-tolerant agreement among the survivors (fault_agreement.hpp); `purpose` names it in
  // errors. Its number (every survivor counts its agreements alike) lands in `number`.
  collectives::Agreement agree(std::uint32_t flags, std::string_view purpose, std::uint64_t& number);
  // The Origin of a group of `members` (ranks of this one) that shrink forms.
  Origin shrunk_origin(const std::vector<int>& members);
  // The plan of the group that grow #`number` forms: `members` (ranks of this one) and the newcomers
  // with tickets `first_ticket` .. `admitted`.
  collectives::GrowPlan grow_plan(const std::vector<int>& members, std::uint64_t number,
                                  std::uint64_t first_ticket, std::uint64_t admitted) const;
  std::uint64_t admitted() const { return admitted_; }
  // After grow #n: its tickets are spent, whether or not the group formed, on every member alike.
  void spend_tickets(std::uint64_t admitted) { admitted_ = admitted; }
  // What a member's forming of `plan` checks between waits: the other members (by heartbeat and by
  // process) and the newcomers (by the process each named with its ticket, where on this host).
  std::function<void()> grow_check(const std::vector<int>& members, const collectives::GrowPlan& plan);
  const std::shared_ptr<Store>& base_store() const { return base_store_; }
  const std::shared_ptr<Store>& store() const { return store_; }
  const CommunicatorOptions& options() const { return options_; }
  std::uint32_t generation() const { return generation_; }
  std::uint64_t id() const { return comm_id_; }
  // "communicator 3 (generation 1)", for messages.
  std::string describe() const;
  const collectives::LinkModel& link() const { return engine_->link(); }
  const collectives::HostLayout& hosts() const { return *hosts_; }
  std::string_view transport_name() const { return transport_->name(); }
  std::uint64_t store_requests_sent() const { return store_->requests_sent(); }
  const std::shared_ptr<collectives::CommunicatorFamily>& family() const { return family_; }
  std::optional<Error> failure();  // Communicator::failure

  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  collectives::CallSequencer sequencer;

 private:
  // The part both constructors share: connects the group's two meshes (collectives, point-to-point).
  // `forming`: the store the meshes form through (store_, or a WatchedStore over it); links made later,
  // on first use, meet through store_. tcp_addresses_: the rank's TCP listener and where the peers'
  // addresses are (null: each TCP mesh listens and publishes its own); `listeners`: both meshes' Unix
  // listeners, named in the ranks' records (null: the host's ranks agree on them through the store).
  void connect(const collectives::HostLayout& hosts, const std::string& job_token,
               const std::shared_ptr<Store>& forming,
               std::shared_ptr<transport::UnixListenerBook> listeners = nullptr);
  // Reads, in one request, the records the meshes will read while they form (the host's other ranks'
  // where they share memory, every lower rank's where every link is made at once); rank 0 learns them from
  // `gathered`, every rank's record as it gathered them for the layout.
  void read_records_at_once(collectives::RecordCache& records, const std::vector<std::string>& gathered,
                            transport::TransportKind kind, bool tcp_addresses, bool unix_listeners);
  // Who of this group is gone, by heartbeat: one for all its agreements, so that a rank found silent in
  // one is gone at once in the next.
  const std::shared_ptr<collectives::PeerSilence>& silence();
  // Makes the call engine once the links are up and the model is known (measured, or inherited).
  void start_engine(collectives::LinkModel link);
  // The transport's options for this communicator's meshes, before the layout's facts are added.
  transport::MeshOptions mesh_options() const;
  void ensure_usable();
  // Publishes `error` as the communicator's first failure (or learns another rank's), ends the
  // communicator, and returns the error to report.
  Error end_with(const Error& error);
  // A sub-communicator's errors name its own ranks: this says which ranks of the job they are.
  Error with_world_ranks(const Error& error) const;

  std::shared_ptr<collectives::CommunicatorFamily> family_;
  // Its CANOPY_* settings, parsed once when the family's first communicator forms (docs/SETTINGS.md).
  const collectives::CommunicatorSettings settings_;
  std::shared_ptr<Store> store_;
  Duration timeout_;
  std::uint64_t comm_id_ = 0;
  CommunicatorOptions options_;
  std::shared_ptr<const collectives::HostLayout> hosts_;  // every call carries it (CollectiveCall::hosts)
  // CANOPY_TRANSPORT=auto: the group's verdict on verbs, as the layout agreed it
  // (MeshOptions::verbs_verdict).
  std::string verbs_verdict_;
  std::vector<int> world_ranks_;  // this group's ranks as ranks of the job (of the first communicator formed)
  std::vector<int> family_ranks_;  // ... as ranks of its family's first communicator, whose monitor beats
  std::uint32_t generation_ = 0;   // shrinks since the job's first communicator
  std::atomic<std::uint64_t> agreements_{0};           // fault-tolerant agreements so far (agree, shrink)
  std::shared_ptr<Store> failure_store_;               // its FirstFailure's keys, where agreements run too
  std::shared_ptr<collectives::PeerSilence> silence_;  // made at the first agreement
  std::shared_ptr<Store> base_store_;  // the job's store, as the first communicator was given it
  std::string store_path_;             // store_'s prefix in it
  std::uint64_t admitted_ = 0;         // join tickets admitted by grow() so far, in this lineage
  int next_world_rank_ = 0;            // the job rank the next newcomer gets
  std::string path_;  // its store keys' prefix below the family's first communicator's ("" there)
  // The rank's one TCP listener, which this group's meshes and its sub-groups' attach to, and the records
  // its peers' addresses are in; null under CANOPY_TRANSPORT=verbs.
  std::shared_ptr<transport::TcpAddressBook> tcp_addresses_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<collectives::PointToPoint> p2p_;
  std::unique_ptr<collectives::CallEngine> engine_;
  std::mutex failure_mutex_;
  std::string failure_;                          // set once a call failed: the communicator is then unusable
  ErrorCode failure_code_ = ErrorCode::Aborted;  // with failure_: Revoked makes later calls say so
  // Set with failure_: every call reads this, and the mutex only after a failure.
  std::atomic<bool> failed_{false};
  std::shared_ptr<collectives::FirstFailure> first_failure_;  // tells every rank who failed first
};

}  // namespace canopy
