// A group of ranks and the collectives they call together.
//
//   auto comm = canopy::Communicator::from_environment();   // canopy-run, torchrun, srun or mpirun
//   comm.broadcast(std::span(weights), /*root=*/0);
//   comm.all_reduce(std::span(gradients), canopy::ReduceOp::Avg);
//
// Every rank must call the same collectives in the same order with matching arguments; when they do
// not, every rank involved gets an Error(Mismatch) naming both sides instead of a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "canopy/types.hpp"

namespace canopy {

namespace collectives {
struct SplitRequest;
}

// Per-call choices; the defaults come from the environment (CANOPY_ALGO, CANOPY_CHUNK_BYTES, CANOPY_TIMEOUT).
struct CollectiveOptions {
  std::string algorithm;        // "" = CANOPY_ALGO for this collective, else "auto" (the cost model chooses)
  std::size_t chunk_bytes = 0;  // pipelining granularity; 0 = default (1 MiB)
  Duration timeout{0};          // 0 = the communicator's timeout
};

struct CommunicatorOptions {
  Duration timeout{0};         // deadline of every call; 0 = CANOPY_TIMEOUT (default 300 s)
  std::string job_token;       // "" = CANOPY_JOB_TOKEN
  int local_rank = -1;         // -1 = derive through the store (ranks grouped by host)
  int local_size = -1;
  bool calibrate = true;       // measure alpha/beta/gamma at start-up for algorithm choice
};

// The handle of an asynchronous collective. Collectives run one after another in the order they
// were issued (the same order on every rank), on a progress thread; blocking calls join that order.
// Until the call completes its buffers belong to it, as with MPI's nonblocking calls: an out-of-place
// call reads its input throughout (it is never copied first), so neither buffer may be touched before
// wait() or completed() says it is done.
class Work {
 public:
  Work() = default;
  bool completed() const;              // finished, successfully or not
  void wait() const;                   // waits; rethrows the call's error
  bool wait_for(Duration timeout) const;  // false when still running after timeout
  std::exception_ptr error() const;    // null while running or after success
  // Runs `f` once when the call ends, successfully or not: at once if it has, else on the thread that
  // ends it. `f` must be quick and must not call into the communicator (hand the news to a thread of
  // yours instead): torch's Futures complete this way.
  void on_completion(std::function<void()> f) const;

  struct State;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// A collective call in untyped form (what the typed helpers below build).
struct CollectiveArgs {
  Collective collective = Collective::AllReduce;
  const void* input = nullptr;  // may equal output (in place)
  void* output = nullptr;
  std::size_t count = 0;        // elements; all_gather/reduce_scatter: elements of one rank's block
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  // all_to_all_v: elements sent to and received from each rank (size() entries each); the blocks lie
  // back to back in rank order in input and output.
  const std::size_t* send_counts = nullptr;
  const std::size_t* recv_counts = nullptr;
};

template <typename T>
constexpr DataType data_type_of() {
  if constexpr (std::is_same_v<T, float>) return DataType::Float32;
  else if constexpr (std::is_same_v<T, double>) return DataType::Float64;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DataType::Int8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DataType::UInt8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::Int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::Int64;
  else static_assert(sizeof(T) == 0,
                     "no DataType for this element type (float, double, int8/uint8, int32, int64); half types "
                     "take the untyped call with DataType::Float16 / BFloat16");
}

class Communicator {
 public:
  // Forms the group described by the environment (CANOPY_*, torchrun, SLURM, Open MPI / PMI variables).
  static Communicator from_environment(const CommunicatorOptions& options = {});
  // Forms a group of `size` ranks meeting through `store`; every rank calls this with its own rank.
  Communicator(std::shared_ptr<Store> store, int rank, int size, const CommunicatorOptions& options = {});
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int rank() const;
  int size() const;
  int local_rank() const;  // rank among the ranks on this host
  int local_size() const;
  // Hosts this group's ranks are on, from the layout agreed while it formed (no call, no message).
  int host_count() const;
  // The transport this group runs on: "shm+tcp", "tcp" or "verbs" (CANOPY_TRANSPORT=auto resolved; "shm+tcp"
  // where some of its ranks share this rank's host and memory).
  std::string_view transport_name() const;
  // Round trips this rank has made to its TCP store so far, over the connection its communicators share
  // (the liveness monitor's own connection not counted; 0 for a file store): what forming a group costs
  // the store.
  std::uint64_t store_requests_sent() const;

  // Untyped core: blocking and asynchronous.
  void run(const CollectiveArgs& args, const CollectiveOptions& options = {});
  Work start(const CollectiveArgs& args, const CollectiveOptions& options = {});

  template <typename T>
  void all_reduce(std::span<T> data, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {}) {
    run({Collective::AllReduce, data.data(), data.data(), data.size(), data_type_of<T>(), op, 0}, options);
  }
  template <typename T>
  Work all_reduce_async(std::span<T> data, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {}) {
    return start({Collective::AllReduce, data.data(), data.data(), data.size(), data_type_of<T>(), op, 0}, options);
  }
  template <typename T>
  void broadcast(std::span<T> data, int root, const CollectiveOptions& options = {}) {
    run({Collective::Broadcast, data.data(), data.data(), data.size(), data_type_of<T>(), ReduceOp::Sum, root},
        options);
  }
  // The result lands in `data` on the root; other ranks' `data` is left as it was.
  template <typename T>
  void reduce(std::span<T> data, ReduceOp op, int root, const CollectiveOptions& options = {}) {
    run({Collective::Reduce, data.data(), data.data(), data.size(), data_type_of<T>(), op, root}, options);
  }
  // output.size() must be size() * input.size(); rank r's input lands at output[r * input.size()].
  template <typename T>
  void all_gather(std::span<const T> input, std::span<T> output, const CollectiveOptions& options = {}) {
    check_blocks(input.size(), output.size(), "all_gather: output");
    run({Collective::AllGather, input.data(), output.data(), input.size(), data_type_of<T>(), ReduceOp::Sum, 0},
        options);
  }
  // input.size() must be size() * output.size(); this rank receives the reduction of block rank().
  template <typename T>
  void reduce_scatter(std::span<const T> input, std::span<T> output, ReduceOp op = ReduceOp::Sum,
                      const CollectiveOptions& options = {}) {
    check_blocks(output.size(), input.size(), "reduce_scatter: input");
    run({Collective::ReduceScatter, input.data(), output.data(), output.size(), data_type_of<T>(), op, 0}, options);
  }
  void barrier(const CollectiveOptions& options = {});

  // input and output hold size() equal blocks; block j of this rank's input lands in block rank() of
  // rank j's output.
  template <typename T>
  void all_to_all(std::span<const T> input, std::span<T> output, const CollectiveOptions& options = {}) {
    run(all_to_all_args(input.data(), output.data(), input.size(), output.size(), data_type_of<T>()), options);
  }
  template <typename T>
  Work all_to_all_async(std::span<const T> input, std::span<T> output, const CollectiveOptions& options = {}) {
    return start(all_to_all_args(input.data(), output.data(), input.size(), output.size(), data_type_of<T>()),
                 options);
  }
  // send_counts[j] elements go to rank j, recv_counts[j] come from it (zero allowed), blocks back to back
  // in rank order. Rank j's send_counts[r] must equal rank r's recv_counts[j]: otherwise Error(Mismatch).
  // The count arrays are read while the call runs.
  template <typename T>
  void all_to_all_v(std::span<const T> input, std::span<const std::size_t> send_counts, std::span<T> output,
                    std::span<const std::size_t> recv_counts, const CollectiveOptions& options = {}) {
    run(all_to_all_v_args(input.data(), input.size(), send_counts, output.data(), output.size(), recv_counts,
                          data_type_of<T>()),
        options);
  }
  template <typename T>
  Work all_to_all_v_async(std::span<const T> input, std::span<const std::size_t> send_counts, std::span<T> output,
                          std::span<const std::size_t> recv_counts, const CollectiveOptions& options = {}) {
    return start(all_to_all_v_args(input.data(), input.size(), send_counts, output.data(), output.size(),
                                   recv_counts, data_type_of<T>()),
                 options);
  }
  // Rank r's input lands at output[r * input.size()] on the root; output is used on the root only (its
  // size must be size() * input.size() there).
  template <typename T>
  void gather(std::span<const T> input, std::span<T> output, int root, const CollectiveOptions& options = {}) {
    run(gather_args(input.data(), input.size(), output.data(), output.size(), root, data_type_of<T>()), options);
  }
  // Block r of the root's input (size() * output.size() elements) lands in rank r's output; input is
  // used on the root only.
  template <typename T>
  void scatter(std::span<const T> input, std::span<T> output, int root, const CollectiveOptions& options = {}) {
    run(scatter_args(input.data(), input.size(), output.data(), output.size(), root, data_type_of<T>()),
        options);
  }

  // Point-to-point, matched as MPI matches (source, tag): the messages from one peer with one tag arrive in
  // the order they were sent, whatever the other tags and the collectives do. It never takes part in the
  // collectives' order: any subset of ranks exchanges any number of messages between or during collectives.
  // A receive whose size differs from the message is Error(Mismatch) naming both sides, before a byte lands.
  void send(std::span<const std::byte> data, int peer, std::uint32_t tag = 0);
  void recv(std::span<std::byte> data, int peer, std::uint32_t tag = 0);
  // The same, returning at once; the buffer belongs to the call until the Work completes.
  Work send_async(std::span<const std::byte> data, int peer, std::uint32_t tag = 0);
  Work recv_async(std::span<std::byte> data, int peer, std::uint32_t tag = 0);
  // A receive from any rank (MPI_ANY_SOURCE): the first message with `tag` to arrive from any other rank,
  // unless a receive posted earlier (named or not) takes it; returns the sender's rank. The async form
  // writes the sender's rank into `source` before the Work completes; `source`, like the buffer, belongs
  // to the call until then. A peer that leaves does not end it while another may still send.
  int recv_any(std::span<std::byte> data, std::uint32_t tag = 0);
  Work recv_any_async(std::span<std::byte> data, int& source, std::uint32_t tag = 0);

  // Sub-communicators; every rank of this communicator calls them, in the same order as its collectives.
  // split: the ranks that pass the same color form one group, ordered by (key, rank); color < 0 joins
  // none and gets an empty communicator (valid() == false).
  Communicator split(int color, int key = 0);
  // The listed ranks form a group, in the order listed; the others get an empty communicator. Every rank
  // must pass the same list.
  Communicator subgroup(std::span<const int> ranks);
  // A group of the listed ranks, in the order listed, formed by those ranks alone (MPI_Comm_create_group;
  // torch's new_group calls its backend on the members only): every listed rank calls it with the same
  // list and name, the others call nothing. `name` tells apart groups formed from this communicator (torch
  // passes its group name, unique in the job). Error(Mismatch) when members pass different lists.
  Communicator create_group(std::span<const int> ranks, std::string_view name);
  // False for an empty communicator (a rank outside the group of split or subgroup, or a moved-from one);
  // any call on it is Error(InvalidArgument).
  bool valid() const;
  // What ended this communicator (a failed call, a peer found dead while it was idle, abort(), revoke()):
  // the error its later calls raise; none while it is usable.
  std::optional<Error> failure() const;

  // Wakes every waiter with Error(Aborted); every later call fails. Callable from any thread.
  void abort(const std::string& reason = "aborted by the user");

  // Going on after a failure (docs/RELIABILITY.md, *Revoke, agree, shrink*), as MPI's ULFM does.
  //
  // revoke: ends this communicator for every member, not only this rank: their pending and later calls
  // fail with Error(Revoked) naming the call, this rank and `reason`, within milliseconds for a rank
  // waiting on this one and within a heartbeat interval for the others. This rank's sub-communicators
  // are revoked with it. Callable from any thread, any number of times.
  void revoke(const std::string& reason = "revoked by the user");
  // The bitwise AND of `flags` over the ranks that take part, the same on every one of them, even when
  // ranks die while it runs (MPI_Comm_agree): every survivor calls it, in the same order as its other
  // agree and shrink calls; a rank that has not come is left out once its heartbeat stops (or at the
  // deadline). It runs through the store, so it works on a failed or revoked communicator. A rank the
  // others left out gets Error(Revoked); a store that dies fails it (Error(PeerFailed)).
  std::uint32_t agree(std::uint32_t flags);
  // A new communicator of the ranks alive, renumbered in their old order, the same on every survivor:
  // every survivor calls it after a failure or a revoke (it revokes this one first, so that nobody
  // still waits in it). A rank that dies before it takes part is left out; one that dies later makes the
  // new communicator's calls fail, and it is shrunk again. Its connections are made on first use.
  Communicator shrink();
  // Admits the processes waiting in join() on this communicator's store: every member calls it, at a
  // point of its choosing (between steps), and gets a new communicator of the members alive (in their
  // order) followed by the newcomers (in the order they came). With nobody waiting, the members alone.
  // Like shrink, it runs through the store and leaves out a member that died.
  Communicator grow();
  // On a process started later: waits (up to the timeout) until the running group grows, and returns its
  // communicator there. `store` is the job's store, the one the group was formed on; the job token
  // (options or CANOPY_JOB_TOKEN) must be the job's.
  static Communicator join(std::shared_ptr<Store> store, const CommunicatorOptions& options = {});
  // How many processes wait in join() on this communicator's store that no grow() has admitted yet. The
  // first call reads the store; from then on the liveness monitor's thread reads it once a heartbeat round
  // and this returns its last reading, so a loop may ask after every step at no cost (with the monitor off,
  // every call is one store request). Ranks read it at different moments, so they decide together
  // whether to grow (an all-reduce of the counts, Max) rather than each on its own reading.
  std::uint64_t joiners_waiting() const;
  // 0 for a communicator formed on a store, and one more for each shrink() or grow() it came from (its
  // sub-communicators share it). Errors name it.
  std::uint32_t generation() const;

  // The algorithm this call would run (options.algorithm, CANOPY_ALGO, or the cost model's choice)
  // and why: every candidate's predicted time. CANOPY_DEBUG=INFO logs the same for every call.
  struct AlgorithmChoice {
    std::string name;
    double predicted_seconds = 0;  // the cost model's prediction for the chosen algorithm
    std::string explanation;
  };
  AlgorithmChoice choose_algorithm(const CollectiveArgs& args, const CollectiveOptions& options = {}) const;

  // What the cost model believes of this group's network, measured at start-up (or CANOPY_COST_MODEL).
  // The first figures are those of a link between two ranks of one host; where no host has two ranks,
  // or every rank is on one host, they stand for every link, and the figures between hosts equal them.
  struct LinkEstimate {
    double alpha_seconds = 0;           // per message
    double beta_seconds_per_byte = 0;   // per byte on a link
    double gamma_seconds_per_byte = 0;  // per byte reduced
    double beta_eager_seconds_per_byte = 0;  // per byte of a message's first eager_bytes (socket buffers)
    std::uint64_t eager_bytes = 0;
    double alpha_between_hosts_seconds = 0;          // per message between hosts
    double beta_between_hosts_seconds_per_byte = 0;  // per byte between hosts
    std::string description;  // all of it in words, with the hosts whose ranks share cores
  };
  LinkEstimate link_estimate() const;

  class Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  Impl& impl() const;  // throws Error(InvalidArgument) for an empty communicator
  Communicator split_by(const collectives::SplitRequest& request, std::string_view what);
  static Communicator confirm_grown(Communicator grown, int members);
  void check_blocks(std::size_t block, std::size_t whole, const char* what) const;
  CollectiveArgs all_to_all_args(const void* input, void* output, std::size_t input_count,
                                 std::size_t output_count, DataType dtype) const;
  CollectiveArgs all_to_all_v_args(const void* input, std::size_t input_count,
                                   std::span<const std::size_t> send_counts, void* output,
                                   std::size_t output_count, std::span<const std::size_t> recv_counts,
                                   DataType dtype) const;
  CollectiveArgs gather_args(const void* input, std::size_t input_count, void* output, std::size_t output_count,
                             int root, DataType dtype) const;
  CollectiveArgs scatter_args(const void* input, std::size_t input_count, void* output,
                              std::size_t output_count, int root, DataType dtype) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy
