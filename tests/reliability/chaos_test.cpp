// Chaos over real processes: a 4-rank job doing back-to-back all-reduces over shared memory (or real TCP),
// and one of its ranks SIGKILLed or SIGSTOPped at a random moment, or its store process killed. Every
// survivor must end with an error within its call deadline (plus slack for a loaded machine); none may hang,
// crash or see a wrong result. CANOPY_CHAOS_TRIALS=<n> runs n trials of each scenario (the default is small
// so that ctest stays quick); CANOPY_CHAOS_SEED picks the random sequence; every trial prints one line.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "tests/reliability/leak_check.hpp"
#include "tests/reliability/settings.hpp"
#include "tests/support/process_group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::reliability {
namespace {

using testing::Clock;
using testing::ProcessEnd;
using testing::ProcessGroup;
using testing::Reporter;

constexpr int kRanks = 4;
const std::vector<int> kAllRanks = {0, 1, 2, 3};

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', '|');
  return text;
}

// "peer failed" -> "peer_failed": one word, the first of an outcome line after "error".
std::string code_name(ErrorCode code) {
  std::string name(to_string(code));
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

// Back-to-back all-reduces of mixed sizes and algorithms, every result checked exactly, until an
// error or `calls` calls (or `give_up`: a survivor that never notices the failure must not run on).
// Returns the outcome, error code first: "error peer_failed after 12 calls: <message>".
std::string all_reduce_loop(Communicator& comm, long long calls, Clock::time_point give_up) {
  static constexpr std::size_t kCounts[] = {1, 7, 64, 1000, 4099, 65537};
  auto algorithms = collectives::algorithms(Collective::AllReduce);
  std::mt19937_64 random(2024);  // the same sequence on every rank: the same calls in the same order
  std::vector<std::int32_t> data;
  const std::int32_t rank_sum = comm.size() * (comm.size() + 1) / 2;
  long long done = 0;
  try {
    for (; done < calls && Clock::now() < give_up; ++done) {
      std::size_t count = kCounts[random() % std::size(kCounts)];
      std::string algorithm(algorithms[random() % algorithms.size()].name);
      data.resize(count);
      for (std::size_t j = 0; j < count; ++j)
        data[j] = (comm.rank() + 1) * static_cast<std::int32_t>(1 + j % 5);
      comm.all_reduce(std::span(data), ReduceOp::Sum, {.algorithm = algorithm});
      for (std::size_t j = 0; j < count; ++j) {
        if (data[j] != rank_sum * static_cast<std::int32_t>(1 + j % 5))
          return fmt::format("wrong element {} of {} ({}) in call {}: {}", j, count, algorithm, done,
                             data[j]);
      }
    }
    return fmt::format("ok {} calls", done);
  } catch (const Error& e) {
    return fmt::format("error {} after {} calls: {}", code_name(e.code()), done, one_line(e.what()));
  }
}

// One rank of a trial: forms the communicator, reduces until the failure, and once every Canopy
// object is destroyed checks that nothing was left behind. The last word ends with "| leaked nothing"
// or "| LEAKED ...".
void chaos_rank(const Reporter& reporter, const std::function<Communicator()>& form, long long calls) {
  const Holdings before = current_holdings();
  std::string outcome;
  try {
    Communicator comm = form();
    reporter.ready();
    outcome = all_reduce_loop(comm, calls, Clock::now() + std::chrono::seconds(120));
  } catch (const Error& e) {
    outcome = fmt::format("error {} while forming: {}", code_name(e.code()), one_line(e.what()));
  }
  reporter.outcome(fmt::format("{} | {}", outcome, leaks_since(before)));
}

// Whether a message names `rank` as a rank: "rank 2", "rank(s) 2", "ranks 1, 2".
bool names_rank(const std::string& message, int rank) {
  const std::regex pattern(fmt::format(R"(\branks?(\(s\))? ([0-9]+, )*{}\b)", rank));
  return std::regex_search(message, pattern);
}

// The first line of an error outcome: the cause. A rank that learnt of the failure from another reports
// the communicator's first failure there; what it saw itself, and its flight recorder, follow on later
// lines (collectives/elastic/first_failure.hpp), and may name a neighbour.
std::string cause_of(const std::string& outcome) {
  return outcome.substr(0, outcome.find('|'));
}

// "error peer_failed ..." -> "peer_failed"; "" for anything that is not an error outcome.
std::string error_code_of(const std::string& outcome) {
  if (outcome.rfind("error ", 0) != 0) return "";
  return outcome.substr(6, outcome.find(' ', 6) - 6);
}

// The tally of one scenario, printed at its end and checked.
struct Tally {
  int trials = 0;
  int survivors = 0;
  std::map<std::string, int> outcomes;  // error code (or "ok") -> survivors
  bool victim_is_a_rank = true;
  int naming_victim = 0;     // survivors whose error names the killed/stopped rank
  double worst_seconds = 0;  // slowest survivor: from the signal to its exit
  std::vector<double> seconds;

  void print(const char* scenario) const {
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    std::string codes;
    for (const auto& [code, n] : outcomes) codes += fmt::format(" {}={}", code, n);
    std::string naming = victim_is_a_rank ? fmt::format("; {} errors name the victim", naming_victim) : "";
    fmt::print(
        "[chaos] {}: {} trials, {} ranks outside the victim,{}{}; their exit after the signal: median "
        "{:.2f} s, worst {:.2f} s\n",
        scenario, trials, survivors, codes, naming, median, worst_seconds);
  }
};

// CANOPY_CHAOS_VERBOSE=1 prints every survivor's last word, error message included.
void print_outcomes(const ProcessGroup& group, const std::vector<int>& ranks) {
  if (setting("CANOPY_CHAOS_VERBOSE", 0) == 0) return;
  for (int rank : ranks) fmt::print("[chaos]     rank {}: {}\n", rank, group.end(rank).describe());
}

int trials_of(long long fallback) {
  return static_cast<int>(setting("CANOPY_CHAOS_TRIALS", fallback));
}

std::mt19937 trial_random() {
  return std::mt19937(static_cast<std::uint32_t>(setting("CANOPY_CHAOS_SEED", 12345)));
}

// One trial: a random rank gets `signal_number` at a random moment, the others must end with an
// error within the deadline.
void rank_failure_trial(int trial, int signal_number, std::mt19937& random, Tally& tally) {
  testing::TempDir dir;
  const int victim = static_cast<int>(random() % kRanks);
  // One SIGKILL trial in six strikes while the group is still forming (store, mesh), the others while
  // the all-reduces run.
  const bool during_setup = signal_number == SIGKILL && random() % 6 == 0;
  const auto delay = std::chrono::milliseconds(during_setup ? random() % 40 : random() % 300);

  // A stopped rank is for the heartbeat to find: the calls' deadline stays out of its way.
  const auto deadline = signal_number == SIGSTOP ? 3 * heartbeat_timeout() : call_timeout();
  ProcessGroup group(kRanks, [&](int rank, const Reporter& reporter) {
    chaos_rank(
        reporter,
        [&] {
          return Communicator(open_file_store(dir.path()), rank, kRanks, test_communicator_options(deadline));
        },
        1'000'000'000);
  });
  if (!during_setup) {
    ASSERT_TRUE(group.wait_ready(kAllRanks, Clock::now() + std::chrono::seconds(60)))
        << "trial " << trial << ": the group did not form";
    for (int rank : kAllRanks)
      ASSERT_FALSE(group.end(rank).ended) << "rank " << rank << " " << group.end(rank).describe();
  }
  std::this_thread::sleep_for(delay);
  const auto signalled_at = Clock::now();
  group.signal(victim, signal_number);

  std::vector<int> survivors;
  for (int rank : kAllRanks)
    if (rank != victim) survivors.push_back(rank);
  const auto bound = deadline + exit_slack();
  bool all_ended = group.wait_ended(survivors, signalled_at + bound);
  group.signal(victim, SIGKILL);  // a stopped victim is ended here; a killed one is already gone
  group.wait_ended({victim}, Clock::now() + std::chrono::seconds(10));

  ++tally.trials;
  std::string line =
      fmt::format("[chaos] trial {:2} {} rank {} {} {} ms:", trial, strsignal(signal_number), victim,
                  during_setup ? "while forming, after" : "while reducing, after", delay.count());
  for (int rank : survivors) {
    const ProcessEnd& end = group.end(rank);
    double seconds = std::chrono::duration<double>(end.ended_at - signalled_at).count();
    std::string code = error_code_of(end.outcome);
    line += fmt::format(" r{}={}/{:.2f}s", rank, end.ended ? (code.empty() ? "NO-ERROR" : code) : "HUNG",
                        seconds);
    EXPECT_TRUE(end.ended) << "trial " << trial << ": rank " << rank << " still runs " << bound.count()
                           << " ms after rank " << victim << " got " << strsignal(signal_number)
                           << " (a hang)";
    if (!end.ended) continue;
    ++tally.survivors;
    ++tally.outcomes[code.empty() ? "none" : code];
    tally.seconds.push_back(seconds);
    tally.worst_seconds = std::max(tally.worst_seconds, seconds);
    EXPECT_TRUE(end.signal == 0 && end.exit_code == 0)
        << "trial " << trial << ": rank " << rank << " crashed: " << end.describe();
    EXPECT_TRUE(code == "peer_failed" || code == "timeout" || code == "aborted")
        << "trial " << trial << ": rank " << rank << " should end with the failure: " << end.describe();
    EXPECT_NE(end.outcome.find("| leaked nothing"), std::string::npos)
        << "trial " << trial << ": rank " << rank << " left something behind: " << end.describe();
    if (names_rank(cause_of(end.outcome), victim)) ++tally.naming_victim;
    // Once the group is formed every survivor blames the victim (collectives/elastic/first_failure.hpp). While it
    // forms, a survivor may only know which store key never came ("verbs_usable/2"): counted, not asserted.
    if (!during_setup) {
      EXPECT_TRUE(names_rank(cause_of(end.outcome), victim))
          << "trial " << trial << ": rank " << rank << " does not blame rank " << victim << ": "
          << end.describe();
    }
    if (signal_number == SIGSTOP) {
      // A stopped rank keeps its sockets open: only its heartbeat's silence can give it away in time.
      EXPECT_NE(end.outcome.find(fmt::format("rank {} sent no heartbeat", victim)), std::string::npos)
          << "trial " << trial << ": rank " << rank << ": " << end.describe();
    }
  }
  fmt::print("{}\n", line);
  print_outcomes(group, survivors);
  EXPECT_TRUE(all_ended);
}

// Over shared memory (the ranks of one host, the default) and over TCP alone.
class ChaosOver : public ::testing::TestWithParam<const char*> {};

TEST_P(ChaosOver, SigkilledRankFailsEverySurvivorWithinTheDeadline) {
  testing::ScopedEnv env;
  use_loopback_only(env);
  use_quick_heartbeat(env);
  env.set("CANOPY_TRANSPORT", GetParam());
  auto random = trial_random();
  Tally tally;
  for (int trial = 0, n = trials_of(10); trial < n; ++trial)
    rank_failure_trial(trial, SIGKILL, random, tally);
  tally.print(GetParam() == std::string("tcp") ? "SIGKILL a rank (tcp)" : "SIGKILL a rank (shm+tcp)");
}

std::string transport_name(const ::testing::TestParamInfo<const char*>& param) {
  return param.param == std::string("tcp") ? "Tcp" : "Shm";
}

INSTANTIATE_TEST_SUITE_P(Links, ChaosOver, ::testing::Values("shm+tcp", "tcp"), transport_name);

TEST(Chaos, SigstoppedRankIsFoundByItsHeartbeatAndNamedByEverySurvivor) {
  testing::ScopedEnv env;
  use_loopback_only(env);
  use_quick_heartbeat(env);
  auto random = trial_random();
  Tally tally;
  for (int trial = 0, n = trials_of(3); trial < n; ++trial) rank_failure_trial(trial, SIGSTOP, random, tally);
  tally.print("SIGSTOP a rank");
}

// The store's process is killed at a random moment, from while the ranks meet through it to after
// they finished. The store is only needed to form the group: a rank either finishes its calls with
// exact results or ends with an error within the deadline; none hangs, crashes or computes wrong.
TEST(Chaos, KilledStoreProcessNeverHangsTheJob) {
  testing::ScopedEnv env;
  use_loopback_only(env);
  use_quick_heartbeat(env);
  auto random = trial_random();
  Tally tally;
  tally.victim_is_a_rank = false;
  const std::string token = "reliability-test";
  for (int trial = 0, n = trials_of(6); trial < n; ++trial) {
    ProcessGroup store(1, [&](int, const Reporter& reporter) {
      TcpStoreServer server("127.0.0.1", 0, token);
      reporter.ready(std::to_string(server.port()));
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until killed
    });
    ASSERT_TRUE(store.wait_ready({0}, Clock::now() + std::chrono::seconds(30)));
    ASSERT_FALSE(store.end(0).ended) << store.end(0).describe();
    const auto port = static_cast<std::uint16_t>(std::stoi(store.end(0).ready_detail));
    // Forming the group takes some tens of milliseconds here: the kill lands as often while the ranks
    // meet through the store as while they reduce (when the store is no longer needed).
    const auto delay = std::chrono::milliseconds(random() % 150);

    ProcessGroup ranks(kRanks, [&](int rank, const Reporter& reporter) {
      chaos_rank(
          reporter,
          [&] {
            return Communicator(connect_tcp_store("127.0.0.1", port, token, call_timeout()), rank, kRanks,
                                test_communicator_options());
          },
          300);
    });
    ranks.wait_ended(kAllRanks, Clock::now() + delay);  // sleeps, noting when each rank is formed
    const auto killed_at = Clock::now();
    store.signal(0, SIGKILL);
    int formed = 0;
    for (int rank : kAllRanks) formed += ranks.end(rank).ready && ranks.end(rank).ready_at <= killed_at;
    // 300 calls take well under a second here; the bound is for a rank that must notice the loss.
    const auto bound = call_timeout() + exit_slack() + std::chrono::seconds(30);
    bool all_ended = ranks.wait_ended(kAllRanks, killed_at + bound);
    EXPECT_TRUE(all_ended) << "trial " << trial << ": a rank still runs " << bound.count()
                           << " ms after the store was killed (a hang)";

    ++tally.trials;
    std::string line = fmt::format("[chaos] trial {:2} SIGKILL store after {} ms, {} ranks formed:", trial,
                                   delay.count(), formed);
    for (int rank : kAllRanks) {
      const ProcessEnd& end = ranks.end(rank);
      double seconds = std::chrono::duration<double>(end.ended_at - killed_at).count();
      std::string code = end.outcome.rfind("ok ", 0) == 0 ? "ok" : error_code_of(end.outcome);
      line +=
          fmt::format(" r{}={}/{:.2f}s", rank, end.ended ? (code.empty() ? "BAD" : code) : "HUNG", seconds);
      if (!end.ended) continue;
      ++tally.survivors;
      ++tally.outcomes[code.empty() ? "bad" : code];
      if (code != "ok") {
        tally.seconds.push_back(seconds);
        tally.worst_seconds = std::max(tally.worst_seconds, seconds);
      }
      EXPECT_TRUE(end.signal == 0 && end.exit_code == 0)
          << "trial " << trial << ": rank " << rank << " crashed: " << end.describe();
      // The liveness monitor loses its store too: it says so and stops, and never blames a rank for it.
      EXPECT_EQ(end.outcome.find("sent no heartbeat"), std::string::npos)
          << "trial " << trial << ": rank " << rank << ": " << end.describe();
      // A store killed during a client's hello is unreachable (PeerFailed), not "not a Canopy store".
      EXPECT_TRUE(code == "ok" || code == "peer_failed" || code == "timeout" || code == "aborted")
          << "trial " << trial << ": rank " << rank << ": " << end.describe();
      EXPECT_NE(end.outcome.find("| leaked nothing"), std::string::npos)
          << "trial " << trial << ": rank " << rank << " left something behind: " << end.describe();
      if (code != "ok") {
        EXPECT_LE(seconds, std::chrono::duration<double>(call_timeout() + exit_slack()).count())
            << "trial " << trial << ": rank " << rank
            << " took too long to report the lost store: " << end.describe();
      }
    }
    fmt::print("{}\n", line);
    print_outcomes(ranks, kAllRanks);
  }
  tally.print("SIGKILL the store");
}

}  // namespace
}  // namespace canopy::reliability
