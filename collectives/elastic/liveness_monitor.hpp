// Finds a rank that stopped answering, not only one whose sockets closed.
//
// A SIGSTOPped or wedged process keeps its sockets open and its kernel acknowledges every byte, so the
// data path cannot tell it from a slow one; TCP keep-alive cannot either. Each rank's monitor thread
// therefore bumps a counter in the store every interval (its heartbeat) and reads the counters of the
// next few ranks. A rank whose counter has not moved for the timeout is silent: the monitor publishes
// "rank 2 sent no heartbeat for 10.3 s" as the communicator's first failure (FirstFailure) and aborts
// this rank's communicator. Every monitor also reads the first failure each interval, so every rank
// aborts naming the same culprit, whether it was in a call or idle.
//
// The heartbeats go through the store, not the data path: collectives never share a socket with them,
// and a rank that only computes for minutes still beats. The monitor works on a store handle of its own
// (Store::open_another: on a TcpStore the same multiplexed connection), so a long get() elsewhere in the
// process never holds its heartbeat back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "collectives/elastic/first_failure.hpp"
#include "common/deadline.hpp"
#include "common/env.hpp"
#include "common/settings.hpp"

namespace canopy::collectives {

struct LivenessSettings {
  Duration interval{1000};  // between heartbeats; 0 turns the monitor off
  Duration timeout{10000};  // a counter still this long makes its rank silent

  bool enabled() const { return interval.count() > 0; }
  // CANOPY_HEARTBEAT_SECONDS (interval, default 1; 0 = off) and CANOPY_HEARTBEAT_TIMEOUT_SECONDS (default
  // 10 intervals). Throws Error(Config) when the timeout is under two intervals.
  static LivenessSettings from_settings(const Settings& settings);
  static LivenessSettings from_environment(const EnvMap& env) { return from_settings(Settings::parse(env)); }
};

class LivenessMonitor {
 public:
  // Called once, on the monitor's thread, with the error to end the communicator with (its code says
  // whether it was revoked or failed).
  using AbortCommunicator = std::function<void(const Error& reason)>;

  // Starts the thread. `store` is the monitor's own handle on the communicator's store; `first_failure`
  // shares it and outlives the monitor. `errand`, when given, runs on the thread once a round, after the
  // heartbeat: another read that belongs off the calls' path (JoinTicketCount::refresh); it must not throw.
  LivenessMonitor(std::shared_ptr<Store> store, FirstFailure& first_failure, int rank, int size,
                  LivenessSettings settings, AbortCommunicator abort_communicator,
                  std::function<void()> errand = nullptr);
  // Stops the thread (within one store request) and marks this rank as gone on purpose, so that the
  // others do not take a rank that finished for a silent one.
  ~LivenessMonitor();
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  // The ranks this one watches: the next min(size - 1, 4) ranks, so every rank has as many watchers
  // and the store serves 4 requests per rank per interval (a beat, the failure record, a check and one
  // read of all watched counters), whatever the group's size.
  static std::vector<int> watched_ranks(int rank, int size);

  // Every peer is known to have formed the group (shrink confirmed it): from now on a peer that never
  // beat is silent, not still forming. Thread-safe.
  void peers_formed() { peers_formed_.store(true, std::memory_order_relaxed); }

 private:
  // What the monitor knows of one watched rank.
  struct Watched {
    int rank = 0;
    std::int64_t beats = 0;     // its counter at the last change seen; 0 = it has not beaten yet
    Clock::time_point since{};  // when this rank first read that value
    std::string process;        // its process's identity (process_identity.hpp), read once it is late
  };
  // Once the communicator has failed the monitor aborts nothing more, but it goes on judging its watched
  // peers and records each one it finds silent ("liveness/silent/<rank>"), so that the survivors'
  // agreements leave out every rank of a lost host at once, not only the first (peer_silence.hpp). With
  // no peer left to judge it only beats: the rank is alive.
  enum class Verdict { KeepWatching, BeatOnly };

  void run() noexcept;
  Verdict check_once();
  void beat();
  // Each watched rank's counter, in the order of watched_ (0 where it has none yet): a CHECK and one
  // GET_MANY once all of them beat, which is every round but the first few; a CHECK and a GET each before.
  std::vector<std::int64_t> read_counters();
  // How a late peer's process ended, where this host's kernel can tell; "" otherwise.
  std::string process_end_of(Watched& peer);
  // True while not stopped; waits up to `pause`.
  bool pause_unless_stopped(Duration pause);

  std::shared_ptr<Store> store_;
  FirstFailure& first_failure_;
  const int rank_;
  const LivenessSettings settings_;
  const AbortCommunicator abort_communicator_;
  const std::function<void()> errand_;
  std::atomic<bool> peers_formed_{false};
  bool aborted_ = false;  // abort_communicator_ has been called
  std::vector<Watched> watched_;
  Clock::time_point last_round_{};
  std::int64_t beats_sent_ = 0;
  std::uint64_t rounds_ = 0;
  std::uint64_t store_requests_ = 0;
  Clock::duration longest_round_gap_{};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // under mutex_
  std::thread thread_;     // last: started once everything above is ready
};

// The handle the monitor and FirstFailure share: one of their own where `store` can open one (so that a
// long get() elsewhere never holds a heartbeat back: a TcpStore's shares its multiplexed connection, a
// torch TCPStore's is a second connection), else `store` itself; null when the store cannot be
// reached. Its calls are bounded by the heartbeat timeout (10 s when the monitor is off).
std::shared_ptr<Store> open_monitor_store(const std::shared_ptr<Store>& store,
                                          const LivenessSettings& settings);

}  // namespace canopy::collectives
