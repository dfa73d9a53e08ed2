#include "collectives/elastic/liveness_monitor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "collectives/elastic/liveness_keys.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"

namespace canopy::collectives {
namespace {

constexpr int kWatchedRanks = 4;
constexpr int kDefaultTimeoutIntervals = 10;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

LivenessSettings LivenessSettings::from_settings(const Settings& given) {
  LivenessSettings settings;
  settings.interval = std::chrono::duration_cast<Duration>(given.duration("CANOPY_HEARTBEAT_SECONDS"));
  settings.timeout = settings.interval * kDefaultTimeoutIntervals;
  if (given.has("CANOPY_HEARTBEAT_TIMEOUT_SECONDS"))
    settings.timeout =
        std::chrono::duration_cast<Duration>(given.duration("CANOPY_HEARTBEAT_TIMEOUT_SECONDS"));
  // One late heartbeat must never be enough to call a rank silent.
  if (settings.enabled() && settings.timeout < settings.interval * 2)
    fail(ErrorCode::Config,
         "CANOPY_HEARTBEAT_TIMEOUT_SECONDS ({} s) must be at least two heartbeat intervals "
         "(CANOPY_HEARTBEAT_SECONDS = {} s)",
         seconds(settings.timeout), seconds(settings.interval));
  return settings;
}

std::vector<int> LivenessMonitor::watched_ranks(int rank, int size) {
  std::vector<int> ranks;
  for (int step = 1; step <= std::min(size - 1, kWatchedRanks); ++step) ranks.push_back((rank + step) % size);
  return ranks;
}

std::shared_ptr<Store> open_monitor_store(const std::shared_ptr<Store>& store,
                                          const LivenessSettings& settings) {
  const Duration timeout = settings.enabled() ? settings.timeout : Duration(std::chrono::seconds(10));
  try {
    if (auto own = store->open_another(timeout)) return own;
    log::debug("this store cannot open a second handle: the liveness monitor shares the communicator's");
    return store;
  } catch (const std::exception& e) {
    log::warn("no liveness monitor and no shared failure report: the store cannot be reached ({})", e.what());
    return nullptr;
  }
}

LivenessMonitor::LivenessMonitor(std::shared_ptr<Store> store, FirstFailure& first_failure, int rank,
                                 int size, LivenessSettings settings, AbortCommunicator abort_communicator,
                                 std::function<void()> errand)
    : store_(std::move(store)),
      first_failure_(first_failure),
      rank_(rank),
      settings_(settings),
      abort_communicator_(std::move(abort_communicator)),
      errand_(std::move(errand)) {
  // Timed from now, not from the epoch, for a peer that never beats once peers_formed() came first.
  const Clock::time_point now = Clock::now();
  for (int watched : watched_ranks(rank, size)) watched_.push_back({watched, 0, now, {}});
  thread_ = std::thread([this] { run(); });
}

LivenessMonitor::~LivenessMonitor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  try {
    store_->set(left_key(rank_), "1");
  } catch (const std::exception& e) {
    log::debug("the liveness monitor could not mark rank {} as gone: {}", rank_, e.what());
  }
  log::debug("liveness monitor of rank {}: {} rounds, {} store requests, longest gap between rounds {:.3f} s",
             rank_, rounds_, store_requests_, seconds(longest_round_gap_));
}

bool LivenessMonitor::pause_unless_stopped(Duration pause) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, pause, [this] { return stopping_; });
}

void LivenessMonitor::run() noexcept {
  try {
    // Once, off the group's critical path: lets a survivor on this host see at once that this process
    // ended (peer_silence.hpp), where its heartbeat would take the timeout to say so.
    if (const std::string identity = this_process_identity(); !identity.empty()) {
      store_->set(process_key(rank_), identity);
      ++store_requests_;
    }
    Verdict verdict = Verdict::KeepWatching;
    do {
      if (verdict == Verdict::KeepWatching)
        verdict = check_once();
      else
        beat();
      if (errand_) errand_();
    } while (pause_unless_stopped(settings_.interval));
  } catch (const std::exception& e) {
    // Not a verdict on any peer: without the store, this rank cannot see anyone's heartbeat.
    std::lock_guard lock(mutex_);
    if (!stopping_)
      log::warn(
          "rank {}: the liveness monitor cannot reach the store, so it stops; a silent peer will now be "
          "found "
          "only at the call deadline (CANOPY_TIMEOUT). The store said: {}",
          rank_, e.what());
  } catch (...) {
    log::warn("rank {}: the liveness monitor stopped on an unknown exception", rank_);
  }
}

std::vector<std::int64_t> LivenessMonitor::read_counters() {
  std::vector<std::string> keys;
  for (const Watched& peer : watched_) keys.push_back(beat_key(peer.rank));
  const bool all_beating = store_->check(keys);
  ++store_requests_;
  std::vector<std::string> texts(keys.size());
  if (all_beating) {
    texts = store_->get_many(keys);
    ++store_requests_;
  } else {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ++store_requests_;
      if (!store_->check({keys[i]})) continue;
      ++store_requests_;
      texts[i] = store_->get(keys[i]);
    }
  }
  std::vector<std::int64_t> counters(keys.size(), 0);
  for (std::size_t i = 0; i < keys.size(); ++i) counters[i] = heartbeat_count(texts[i]);
  return counters;
}

// SET and GET, not ADD: a file store locks a key for ADD, and a rank stopped while holding that lock
// would hold up every reader of its counter.
void LivenessMonitor::beat() {
  store_->set(beat_key(rank_), std::to_string(++beats_sent_));
  ++store_requests_;
}

std::string LivenessMonitor::process_end_of(Watched& peer) {
  if (peer.process.empty()) {
    const std::string key = process_key(peer.rank);
    store_requests_ += 1;
    if (!store_->check({key})) return {};
    ++store_requests_;
    peer.process = store_->get(key);
  }
  return process_end(peer.process);
}

LivenessMonitor::Verdict LivenessMonitor::check_once() {
  beat();
  if (!aborted_) {
    std::optional<FailureRecord> first = first_failure_.read();
    store_requests_ += first ? 2 : 1;
    if (first) {
      aborted_ = true;
      abort_communicator_(Error(first->code, first_failure_.explain(*first)));
    }
  }

  const Clock::time_point now = Clock::now();
  // A round far later than planned means this process or the store stalled (a loaded machine, swapping):
  // the peers may have stalled with it, so silence is timed afresh from here instead of across the gap.
  const Clock::duration gap = rounds_++ > 0 ? now - last_round_ : Clock::duration::zero();
  const bool stalled = gap > settings_.interval + settings_.timeout / 2;
  longest_round_gap_ = std::max(longest_round_gap_, gap);
  last_round_ = now;
  if (stalled)
    log::debug("rank {}: {:.1f} s between two liveness rounds: timing every peer's silence afresh", rank_,
               seconds(gap));

  const std::vector<std::int64_t> counters = read_counters();  // one each, in the order of watched_
  std::size_t next_counter = 0;
  for (auto it = watched_.begin(); it != watched_.end();) {
    Watched& peer = *it;
    const std::int64_t beats = counters[next_counter++];
    // Not beating yet (still forming its communicator): a rank that never comes is the deadline's to name.
    // A peer without beats is timed from the last round before peers_formed(): each round until then
    // restarts its clock.
    if (beats != peer.beats || stalled || (beats == 0 && !peers_formed_.load(std::memory_order_relaxed))) {
      peer.beats = beats;
      peer.since = now;
      ++it;
      continue;
    }
    const Clock::duration silent_for = now - peer.since;
    // Two beats late: where the peer shares this host's kernel, the kernel says whether it has ended,
    // long before the timeout would (a SIGKILLed rank this rank has no socket to).
    const std::string ended = silent_for >= 2 * settings_.interval ? process_end_of(peer) : std::string();
    if (silent_for < settings_.timeout && ended.empty()) {
      ++it;
      continue;
    }
    ++store_requests_;
    if (store_->check({left_key(peer.rank)})) {  // it destroyed its communicator: finished, not silent
      it = watched_.erase(it);
      continue;
    }
    if (!ended.empty()) {  // the kernel tells the survivors' agreements too
      if (!aborted_) {
        aborted_ = true;
        Error exited(
            ErrorCode::PeerFailed,
            fmt::format("rank {}: rank {} {} without leaving the group (its heartbeat stopped {:.1f} s "
                        "ago): did it crash or was it killed?",
                        rank_, peer.rank, ended, seconds(silent_for)));
        abort_communicator_(first_failure_.blame(exited));
      }
      it = watched_.erase(it);
      continue;
    }
    // The verdict stays in the store with the count it stopped at (peer_silence.hpp): the survivors'
    // agreements then leave this rank out at once rather than timing its silence afresh.
    const int silent = peer.rank;
    store_->set(silent_key(silent), std::to_string(beats));
    ++store_requests_;
    it = watched_.erase(it);
    if (aborted_) continue;
    aborted_ = true;
    Error verdict(ErrorCode::PeerFailed,
                  fmt::format("rank {}: rank {} sent no heartbeat for {:.1f} s (its counter stayed at {}; "
                              "heartbeat every {} s, timeout {} s: CANOPY_HEARTBEAT_SECONDS, "
                              "CANOPY_HEARTBEAT_TIMEOUT_SECONDS): is rank {} stopped (SIGSTOP), swapping or "
                              "stuck?",
                              rank_, silent, seconds(silent_for), beats, seconds(settings_.interval),
                              seconds(settings_.timeout), silent));
    abort_communicator_(first_failure_.blame(verdict));
  }
  // Before a failure the record is read every round, even with nobody left to watch (a revoke comes that
  // way).
  return aborted_ && watched_.empty() ? Verdict::BeatOnly : Verdict::KeepWatching;
}

}  // namespace canopy::collectives
