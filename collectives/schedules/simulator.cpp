#include "collectives/schedules/simulator.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>

#include "collectives/kernels/reduce_kernels.hpp"
#include "collectives/schedules/lower_bounds.hpp"
#include "collectives/schedules/schedule_checks.hpp"
#include "collectives/schedules/simulated_hosts.hpp"
#include "collectives/schedules/step_writer.hpp"
#include "common/error.hpp"

namespace canopy::collectives {
namespace {

// The data side of a simulation; absent when only the time is wanted.
struct DataModel {
  DataType type;
  ReduceOp op;
  std::vector<std::vector<std::byte>>* data;   // each rank's Data buffer
  std::vector<std::vector<std::byte>> inputs;  // each rank's Input buffer (out of place)
};

struct Message {
  int from = 0;
  StepIndex send_step = 0;
  std::uint32_t tag = 0;
  std::uint64_t count = 0;
  int round = 0;
  std::vector<std::byte> payload;  // empty when no data is moved
};

// Steps to one peer (or from one peer) in step order: the k-th send to b meets b's k-th receive from us.
struct PeerQueue {
  std::vector<StepIndex> steps;
  std::size_t next = 0;  // the first not yet started (sends) or matched (receives)
};

// A connection's socket buffer: the eager bytes a sender may still hand off at the eager rate. It refills
// only when the connection falls idle: messages sent back to back share one buffer's worth, so cutting a
// message into pieces gains nothing.
struct SocketState {
  double busy_until = -1;
  std::uint64_t eager_left = 0;
};

struct RankState {
  Schedule schedule;
  std::vector<Step>& steps() { return schedule.steps; }
  std::vector<std::uint32_t> waiting;  // deps not yet done, per step
  std::vector<std::vector<StepIndex>> dependents;
  std::vector<char> ready;
  std::vector<char> done;
  std::vector<int> round;
  std::map<int, PeerQueue> sends_to;
  std::vector<std::pair<int, PeerQueue*>> send_queues;  // sends_to's entries in peer order, for the scans
  std::map<int, PeerQueue> recvs_from;
  std::map<int, std::deque<std::size_t>> inbox;  // arrived, unmatched messages by sender
  std::vector<std::byte> staging;
  // Its links, one of each class (LinkClass): to the ranks of its own host, and to the network.
  double out_free[2] = {0, 0};
  double in_free[2] = {0, 0};
  double cpu_free = 0;
  int last_out_round[2] = {0, 0};  // of the latest message on each link
  int last_in_round[2] = {0, 0};
  std::map<int, SocketState> sockets;  // toward each peer
  std::size_t steps_done = 0;
  bool sends_only_within_host = true;  // every peer it sends to shares its host
  int ready_heads = 0;                 // send queues whose first unstarted step is ready
};

class Engine {
 public:
  Engine(const Algorithm& algorithm, std::vector<CollectiveCall> calls, std::size_t element_size,
         const LinkModel& model, std::optional<DataModel> data)
      : algorithm_(algorithm),
        calls_(std::move(calls)),
        call_(calls_.at(0)),
        element_size_(element_size),
        model_(model),
        data_(data),
        hosts_(checked_layout(), call_.size, context()) {
    ranks_.resize(static_cast<std::size_t>(call_.size));
    for (int r = 0; r < call_.size; ++r) build(r);
    rank_work_.assign(ranks_.size(), 0.0);
    senders_.assign((ranks_.size() + 63) / 64, 0);
    layout_hosts_ = !call_.layout().host_of_rank.empty();
    hosts_count_ = layout_hosts_ ? call_.layout().cores_of_host.size() : 1;
    all_send_within_hosts_ = std::all_of(ranks_.begin(), ranks_.end(),
                                         [](const RankState& rank) { return rank.sends_only_within_host; });
  }

  // Runs to the end; fills `transfers` and returns when the last rank finished. Stops early once the
  // call has certainly passed `bound` (cut_off() then says so, and what was reached is a lower bound).
  double run(std::vector<TransferEvent>* transfers, const PredictionBound& bound = {}) {
    transfers_ = transfers;
    for (int r = 0; r < call_.size; ++r) {
      RankState& rank = state(r);
      steps_left_ += rank.steps().size();
      for (StepIndex i = 0; i < rank.steps().size(); ++i) {
        if (rank.waiting[i] == 0) push(0, EventKind::Ready, r, i);
      }
    }
    while (!events_.empty()) {
      const double now = events_.top().time;
      // Every event left is at `now` or later, so a step not yet done finishes no sooner; the busiest
      // rank's work only grows.
      if (steps_left_ > 0 && (now > bound.seconds || busiest_work_ > bound.stream_seconds)) {
        cut_off_ = true;
        return std::max(finish_time_, now);
      }
      while (!events_.empty() && events_.top().time == now) {
        const Event event = events_.top();
        events_.pop();
        handle(event);
      }
      start_transfers(now);
    }
    check_finished();
    return finish_time_;
  }

  std::size_t messages_sent() const { return messages_.size(); }
  bool cut_off() const { return cut_off_; }

  // A call's time in a stream of them: calls overlap, and the rank (or the shared cores of a host) with
  // the most work of its own per call sets the pace, whatever the latency of one call.
  double stream_seconds() const {
    return std::max(*std::max_element(rank_work_.begin(), rank_work_.end()), hosts_.pace());
  }

 private:
  enum class EventKind { Ready, Done, Arrive, Freed };
  struct Event {
    double time;
    std::uint64_t sequence;  // ties break in the order events were made: deterministic
    EventKind kind;
    int rank;
    std::size_t index;  // a step, or (Arrive) a message
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  RankState& state(int rank) { return ranks_[static_cast<std::size_t>(rank)]; }

  std::string context() const {
    return fmt::format("{} {} (P={}, count={}, root={}, chunk_count={})", to_string(call_.collective),
                       algorithm_.name, call_.size, call_.count, call_.root, call_.chunk_count);
  }

  [[noreturn]] void fail_step(int rank, std::size_t index, const std::string& what) {
    fail(ErrorCode::Protocol, "{}: rank {} step {} ({}): {}", context(), rank, index,
         describe(state(rank).steps()[index]), what);
  }

  // The call must make sense, and every rank's must carry the same host layout; returns it.
  const HostLayout& checked_layout() {
    if (call_.size < 1) fail(ErrorCode::InvalidArgument, "{}: the world size must be at least 1", context());
    if (algorithm_.collective != call_.collective) {
      fail(ErrorCode::InvalidArgument, "{}: the algorithm belongs to {}", context(),
           to_string(algorithm_.collective));
    }
    if (calls_.size() != static_cast<std::size_t>(call_.size))
      fail(ErrorCode::InvalidArgument, "{}: {} calls for {} ranks", context(), calls_.size(), call_.size);
    if (call_.rooted() && (call_.root < 0 || call_.root >= call_.size)) {
      fail(ErrorCode::InvalidArgument, "{}: root {} is not a rank of 0..{}", context(), call_.root,
           call_.size - 1);
    }
    if (call_.chunk_count == 0) fail(ErrorCode::InvalidArgument, "{}: chunk_count must be >= 1", context());
    for (const CollectiveCall& call : calls_) {
      if (call.hosts != call_.hosts && call.layout().host_of_rank != call_.layout().host_of_rank)
        fail(ErrorCode::InvalidArgument, "{}: rank {}'s call has another host layout than rank 0's",
             context(), call.rank);
    }
    return call_.layout();
  }

  const CollectiveCall& call_of(int rank) const { return calls_[static_cast<std::size_t>(rank)]; }

  // Builds rank r's schedule, checks what can be checked of one rank alone, and links its steps.
  void build(int r) {
    const CollectiveCall& call = call_of(r);
    if (call.rank != r)
      fail(ErrorCode::InvalidArgument, "{}: the call of rank {} says rank {}", context(), r, call.rank);
    RankState& rank = state(r);
    rank.schedule = algorithm_.build(call);
    const std::size_t n = rank.steps().size();
    rank.waiting.assign(n, 0);
    rank.dependents.assign(n, {});
    rank.ready.assign(n, 0);
    rank.done.assign(n, 0);
    rank.round.assign(n, 0);
    check_rank_schedule(rank.schedule, call, context());
    for (std::size_t i = 0; i < n; ++i) {
      const Step& step = rank.steps()[i];
      for (std::uint32_t dep : step.deps) rank.dependents[dep].push_back(static_cast<StepIndex>(i));
      rank.waiting[i] = static_cast<std::uint32_t>(step.deps.size());
      if (step.kind == StepKind::Send) {
        rank.sends_to[step.peer].steps.push_back(static_cast<StepIndex>(i));
        rank.sends_only_within_host = rank.sends_only_within_host && hosts_.same_host(r, step.peer);
      }
      if (step.kind == StepKind::Recv || step.kind == StepKind::RecvReduce)
        rank.recvs_from[step.peer].steps.push_back(static_cast<StepIndex>(i));
    }
    for (auto& [peer, queue] : rank.sends_to) rank.send_queues.emplace_back(peer, &queue);
    if (data_) rank.staging.assign(rank.schedule.staging_count * element_size_, std::byte{0});
  }

  void push(double time, EventKind kind, int rank, std::size_t index) {
    events_.push(Event{time, sequence_++, kind, rank, index});
  }

  std::byte* bytes_of(int rank, const Block& block) {
    const auto r = static_cast<std::size_t>(rank);
    std::byte* base = block.buffer == Buffer::Data    ? (*data_->data)[r].data()
                      : block.buffer == Buffer::Input ? data_->inputs[r].data()
                                                      : state(rank).staging.data();
    return base + block.offset * element_size_;
  }

  double reduce_seconds(std::uint64_t count) const {
    return static_cast<double>(count * element_size_) * model_.gamma;
  }

  // What stream_seconds() adds up: rank r's own work (and SimulatedHosts its host's).
  void add_rank_work(int r, double seconds) {
    double& work = rank_work_[static_cast<std::size_t>(r)];
    work += seconds;
    busiest_work_ = std::max(busiest_work_, work);
  }

  // Runs `seconds` of work on the rank's CPU from `now` on; returns when it ends.
  double occupy_cpu(int r, double now, double seconds) {
    RankState& rank = state(r);
    double* core = hosts_.core_for_compute(r);
    add_rank_work(r, seconds);
    if (core != nullptr) hosts_.add_core_work(r, seconds);
    const double start = std::max({now, rank.cpu_free, core != nullptr ? *core : 0.0});
    rank.cpu_free = start + seconds;
    if (core != nullptr) *core = rank.cpu_free;
    return rank.cpu_free;
  }

  void handle(const Event& event) {
    switch (event.kind) {
      case EventKind::Ready:
        on_ready(event.rank, static_cast<StepIndex>(event.index), event.time);
        break;
      case EventKind::Done:
        on_done(event.rank, static_cast<StepIndex>(event.index), event.time);
        break;
      case EventKind::Arrive:
        on_arrive(event.index, event.time);
        break;
      case EventKind::Freed:
        break;  // run() then starts what waited for a core or a host's network link
    }
  }

  void on_ready(int r, StepIndex i, double now) {
    RankState& rank = state(r);
    const Step& step = rank.steps()[i];
    rank.ready[i] = 1;
    int latest = 0;
    for (std::uint32_t dep : step.deps) latest = std::max(latest, rank.round[dep]);
    rank.round[i] = step.kind == StepKind::Send ? latest + 1 : latest;
    switch (step.kind) {
      case StepKind::Send: {
        const PeerQueue& queue = rank.sends_to[step.peer];
        if (queue.next < queue.steps.size() && queue.steps[queue.next] == i && rank.ready_heads++ == 0)
          senders_[static_cast<std::size_t>(r) / 64] |= bit_of(r);
        break;  // start_transfers sends it when the links are free
      }
      case StepKind::Recv:
      case StepKind::RecvReduce:
        match(r, step.peer, now);
        break;
      case StepKind::Copy:
        push(occupy_cpu(r, now, reduce_seconds(step.src.count)), EventKind::Done, r, i);
        break;
    }
  }

  void on_done(int r, StepIndex i, double now) {
    RankState& rank = state(r);
    const Step& step = rank.steps()[i];
    if (data_ && step.kind == StepKind::RecvReduce) {
      reduce_to(data_->type, data_->op, bytes_of(r, step.dst), bytes_of(r, step.src),
                bytes_of(r, step.staging), step.dst.count, step.incoming_first);
    }
    if (data_ && step.kind == StepKind::Copy && step.src.count > 0) {
      std::memmove(bytes_of(r, step.dst), bytes_of(r, step.src), step.src.count * element_size_);
    }
    rank.done[i] = 1;
    ++rank.steps_done;
    --steps_left_;
    finish_time_ = std::max(finish_time_, now);
    for (StepIndex next : rank.dependents[i]) {
      if (--rank.waiting[next] == 0) push(now, EventKind::Ready, r, next);
    }
  }

  void on_arrive(std::size_t message_index, double now) {
    const Message& message = messages_[message_index];
    const int to = state(message.from).steps()[message.send_step].peer;
    on_done(message.from, message.send_step, now);
    state(to).inbox[message.from].push_back(message_index);
    match(to, message.from, now);
  }

  // Hands arrived messages from `from` to rank r's receives from it, in order, while both exist.
  void match(int r, int from, double now) {
    RankState& rank = state(r);
    PeerQueue& queue = rank.recvs_from[from];
    std::deque<std::size_t>& inbox = rank.inbox[from];
    while (queue.next < queue.steps.size() && rank.ready[queue.steps[queue.next]] && !inbox.empty()) {
      const StepIndex i = queue.steps[queue.next++];
      Message& message = messages_[inbox.front()];
      inbox.pop_front();
      const Step& step = rank.steps()[i];
      if (message.tag != step.tag || message.count != step.dst.count) {
        fail_step(
            r, i,
            fmt::format("the next message from rank {} is its step {} ({}) with tag {:#x} and {} elements",
                        from, message.send_step, describe(state(from).steps()[message.send_step]),
                        message.tag, message.count));
      }
      rank.round[i] = std::max(rank.round[i], message.round);
      const Block& landing = step.kind == StepKind::Recv ? step.dst : step.staging;
      if (data_ && !message.payload.empty()) {
        std::memcpy(bytes_of(r, landing), message.payload.data(), message.payload.size());
      }
      message.payload = {};
      const double done =
          step.kind == StepKind::Recv ? now : occupy_cpu(r, now, reduce_seconds(step.dst.count));
      push(done, EventKind::Done, r, i);
    }
  }

  // Which of a rank's links a message between `from` and `to` takes.
  int link_class(int from, int to) const { return hosts_.same_host(from, to) ? 0 : 1; }

  // Starts every message whose sender's outgoing link and receiver's incoming link (of its class) are
  // free now. A rank sends its lowest ready step among the next sends to each peer whose links are free.
  void start_transfers(double now) {
    // Hundreds of ranks sharing a few cores: most wait for a core, and are skipped without a look at
    // their queues (what keeps a first call's choice among algorithms cheap at 512 ranks). A host found
    // busy stays so for the rest of this scan: time does not move within it.
    busy_hosts_.assign(hosts_count_, 0);
    busy_count_ = 0;
    for (std::size_t word = 0; word < senders_.size(); ++word) {
      for (std::uint64_t bits = senders_[word]; bits != 0; bits &= bits - 1) {
        if (!try_to_send(static_cast<int>(word * 64) + std::countr_zero(bits), now)) return;
      }
    }
  }

  // One rank's part of start_transfers(): false when no rank at all can start a message now.
  bool try_to_send(int r, double now) {
    RankState& rank = state(r);
    if (rank.sends_only_within_host && host_busy_now(r, now))
      return !(all_send_within_hosts_ && busy_count_ == hosts_count_);
    while (true) {
      PeerQueue* chosen = nullptr;
      for (auto [peer, queue_pointer] : rank.send_queues) {
        PeerQueue& queue = *queue_pointer;
        if (queue.next >= queue.steps.size() || !rank.ready[queue.steps[queue.next]]) continue;
        const int kind = link_class(r, peer);
        if (rank.out_free[kind] > now || state(peer).in_free[kind] > now ||
            hosts_.network_free(r, peer) > now)
          continue;
        if (const CoreClaim cores = hosts_.cores_for_message(r, peer);
            cores.count > 0 && *cores.cores[0] > now)
          continue;
        if (chosen == nullptr || queue.steps[queue.next] < chosen->steps[chosen->next]) chosen = &queue;
      }
      if (chosen == nullptr) break;
      transmit(r, chosen->steps[chosen->next++], now);
      if ((chosen->next >= chosen->steps.size() || !rank.ready[chosen->steps[chosen->next]]) &&
          --rank.ready_heads == 0)
        senders_[static_cast<std::size_t>(r) / 64] &= ~bit_of(r);
    }
    return true;
  }

  bool host_busy_now(int r, double now) {
    const std::size_t host = layout_hosts_ ? static_cast<std::size_t>(call_.layout().host_of(r)) : 0;
    if (!busy_hosts_[host] && hosts_.host_cores_busy(r, now)) {
      busy_hosts_[host] = 1;
      ++busy_count_;
    }
    return busy_hosts_[host];
  }

  void transmit(int r, StepIndex i, double now) {
    RankState& rank = state(r);
    const Step& step = rank.steps()[i];
    const LinkCost& link = model_.link(hosts_.same_host(r, step.peer));
    const std::uint64_t bytes = step.src.count * element_size_;
    SocketState& socket = rank.sockets[step.peer];
    if (now > socket.busy_until) socket.eager_left = link.eager_bytes;
    const std::uint64_t eager = std::min(bytes, socket.eager_left);
    socket.eager_left -= eager;
    const double finish = now + link.message_seconds(bytes, eager);
    // The sender's pace counts the whole message; its host's cores only the copies of its bytes (one on
    // each end): most of alpha is flight and the receiver's wake-up, which take no core.
    add_rank_work(r, link.message_seconds(bytes, eager));
    if (const CoreClaim cores = hosts_.cores_for_message(r, step.peer); cores.count > 0) {
      hosts_.add_core_work(r, link.byte_seconds(bytes, eager) * cores.count);
      // The other end's copy of the bytes runs on a second core: it delays what comes after on this
      // host, not the message itself, which moves at the rate measured for it.
      if (cores.count > 1) {
        *cores.cores[1] = std::max(now, *cores.cores[1]) + link.byte_seconds(bytes, eager);
        push(*cores.cores[1], EventKind::Freed, r, 0);
      }
      // Held for its bytes and its share of alpha: with all of alpha, exactly until the message arrives,
      // whose own event then frees the core.
      const double held = link.alpha * link.alpha_share_on_core + link.byte_seconds(bytes, eager);
      *cores.cores[0] = std::max(now, *cores.cores[0]) + held;
      if (*cores.cores[0] < finish) push(*cores.cores[0], EventKind::Freed, r, 0);
    }
    // Between hosts its bytes hold both hosts' network links, which their other ranks wait for.
    if (const double freed = hosts_.occupy_network(r, step.peer, now, link.byte_seconds(bytes, eager));
        freed > now)
      push(freed, EventKind::Freed, r, 0);
    socket.busy_until = finish;
    const int kind = link_class(r, step.peer);
    rank.out_free[kind] = finish;
    state(step.peer).in_free[kind] = finish;
    // A message goes one round after what it waits for: its data, and the link time it queued for.
    rank.round[i] =
        1 + std::max({rank.round[i] - 1, rank.last_out_round[kind], state(step.peer).last_in_round[kind]});
    rank.last_out_round[kind] = state(step.peer).last_in_round[kind] = rank.round[i];
    Message message{r, i, step.tag, step.src.count, rank.round[i], {}};
    if (data_) {
      const std::byte* source = bytes_of(r, step.src);
      message.payload.assign(source, source + bytes);
    }
    messages_.push_back(std::move(message));
    if (transfers_ != nullptr) {
      transfers_->push_back(
          TransferEvent{r, step.peer, step.tag, step.src, bytes, now, finish, rank.round[i]});
    }
    push(finish, EventKind::Arrive, r, messages_.size() - 1);
  }

  // Everything done and every message received, or a precise account of what is stuck.
  void check_finished() {
    std::vector<std::string> stuck;
    for (int r = 0; r < call_.size; ++r) {
      RankState& rank = state(r);
      if (rank.steps_done == rank.steps().size()) continue;
      stuck.push_back(explain_stuck(r));
    }
    if (!stuck.empty()) {
      const std::size_t shown = std::min<std::size_t>(stuck.size(), 4);
      fail(ErrorCode::Protocol, "{}: deadlock: no step can progress; {}{}", context(),
           fmt::join(stuck.begin(), stuck.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
           stuck.size() > shown ? fmt::format("; and {} more ranks", stuck.size() - shown) : "");
    }
    for (int r = 0; r < call_.size; ++r) {
      for (const auto& [from, inbox] : state(r).inbox) {
        if (inbox.empty()) continue;
        const Message& message = messages_[inbox.front()];
        fail(ErrorCode::Protocol,
             "{}: rank {} step {} ({}) was never received: rank {} posts no more receives from it", context(),
             from, message.send_step, describe(state(from).steps()[message.send_step]), r);
      }
    }
  }

  std::string explain_stuck(int r) {
    RankState& rank = state(r);
    // The first undone step that is ready says best why the rank is stuck.
    for (StepIndex i = 0; i < rank.steps().size(); ++i) {
      if (rank.done[i] || !rank.ready[i]) continue;
      const Step& step = rank.steps()[i];
      const std::string where = fmt::format("rank {} step {} ({})", r, i, describe(step));
      if (step.kind == StepKind::Send) {
        const PeerQueue& queue = rank.sends_to[step.peer];
        return fmt::format("{} waits behind its earlier send step {} to the same peer", where,
                           queue.steps[queue.next]);
      }
      if (step.kind == StepKind::Copy) return where + " is running";
      const PeerQueue& queue = rank.recvs_from[step.peer];
      if (queue.next < queue.steps.size() && queue.steps[queue.next] != i) {
        return fmt::format("{} waits behind its earlier receive step {} from the same peer", where,
                           queue.steps[queue.next]);
      }
      const PeerQueue& their_sends = state(step.peer).sends_to[r];
      return fmt::format(
          "{} waits for a message rank {} never sends ({} of its {} sends to rank {} went out)", where,
          step.peer, their_sends.next, their_sends.steps.size(), r);
    }
    for (StepIndex i = 0; i < rank.steps().size(); ++i) {
      if (!rank.done[i])
        return fmt::format("rank {} step {} ({}) waits for its dependencies", r, i,
                           describe(rank.steps()[i]));
    }
    return fmt::format("rank {}", r);
  }

  const Algorithm& algorithm_;
  std::vector<CollectiveCall> calls_;  // rank r's view of the call
  const CollectiveCall& call_;         // rank 0's: what every rank shares (collective, size, root)
  std::size_t element_size_;
  LinkModel model_;
  std::optional<DataModel> data_;
  SimulatedHosts hosts_;
  std::vector<char> busy_hosts_;  // start_transfers(): hosts whose cores are all busy now
  std::size_t busy_count_ = 0;    // how many
  std::size_t hosts_count_ = 1;
  bool layout_hosts_ = false;
  bool all_send_within_hosts_ = false;
  std::vector<RankState> ranks_;
  std::vector<double> rank_work_;  // per rank: its sends and reductions, as stream_seconds() counts them
  // Bit r % 64 of word r / 64: rank r has a ready send at the head of a queue (RankState::ready_heads).
  std::vector<std::uint64_t> senders_;
  static std::uint64_t bit_of(int rank) { return std::uint64_t{1} << (rank % 64); }
  double busiest_work_ = 0;     // the largest of rank_work_
  std::size_t steps_left_ = 0;  // of all ranks, not yet done
  bool cut_off_ = false;
  std::vector<Message> messages_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t sequence_ = 0;
  double finish_time_ = 0;
  std::vector<TransferEvent>* transfers_ = nullptr;
};

}  // namespace

Simulation simulate(const Algorithm& algorithm, std::vector<CollectiveCall> calls, DataType type, ReduceOp op,
                    std::vector<RankBuffers> buffers, const LinkModel& model) {
  const std::string what =
      fmt::format("simulate {} {}", calls.empty() ? "?" : to_string(calls[0].collective), algorithm.name);
  if (op == ReduceOp::Avg)
    fail(ErrorCode::InvalidArgument,
         "{}: Avg is Sum finished by the executor (finish_average); simulate Sum instead", what);
  if (calls.empty()) fail(ErrorCode::InvalidArgument, "{}: no ranks", what);
  if (buffers.size() != calls.size())
    fail(ErrorCode::InvalidArgument, "{}: {} ranks' buffers for {} ranks", what, buffers.size(),
         calls.size());
  const std::size_t element_size = size_of(type);
  for (std::size_t r = 0; r < calls.size(); ++r) {
    const CollectiveCall& call = calls[r];
    const std::size_t data_bytes = call.data_count() * element_size;
    const std::size_t input_bytes = separate_input(call) ? call.input_count() * element_size : 0;
    if (buffers[r].data.size() != data_bytes || buffers[r].input.size() != input_bytes)
      fail(ErrorCode::InvalidArgument,
           "{}: rank {} has {} bytes of Data and {} of Input; expected {} and {} ({})", what, r,
           buffers[r].data.size(), buffers[r].input.size(), data_bytes, input_bytes, to_string(type));
  }
  Simulation simulation;
  DataModel data{type, op, &simulation.data, {}};
  for (RankBuffers& rank : buffers) {
    simulation.data.push_back(std::move(rank.data));
    data.inputs.push_back(std::move(rank.input));
  }
  Engine engine(algorithm, std::move(calls), element_size, model, std::move(data));
  simulation.predicted_seconds = engine.run(&simulation.transfers);
  for (const TransferEvent& transfer : simulation.transfers) {
    simulation.rounds = std::max(simulation.rounds, transfer.round);
  }
  return simulation;
}

Prediction predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                   const LinkModel& model, const PredictionBound& bound) {
  if (algorithm.one_shot && call.through_cells(element_size))
    return predict_through_cells(call, element_size, model);
  if (const std::optional<Prediction> at_least = ruled_out(algorithm, call, element_size, model, bound))
    return *at_least;
  Engine engine(algorithm, every_rank(call), element_size, model, std::nullopt);
  Prediction prediction;
  prediction.seconds = engine.run(nullptr, bound);
  prediction.messages = engine.messages_sent();
  prediction.stream_seconds = engine.stream_seconds();
  prediction.cut_off = engine.cut_off();
  return prediction;
}

double predict_seconds(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                       const LinkModel& model) {
  return predict(algorithm, call, element_size, model).seconds;
}

}  // namespace canopy::collectives
