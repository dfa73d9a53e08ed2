#include "collectives/selection/link_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"
#include "collectives/selection/link_model_text.hpp"
#include "collectives/selection/probe_memory.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::collectives {

namespace {

using Seconds = std::chrono::duration<double>;

// Probe messages travel as Bootstrap frames, numbered by `step` so that a late message of one probe
// can never be taken for another's.
enum ProbeStep : std::uint32_t {
  kToken = 0,
  kBulk = 1,
  kEager = 2,
  kSizing = 3,
  kAgreeLength = 4,
  kAgreeText = 5,
  kBusyRound = 6
};

transport::Envelope probe_envelope(std::uint64_t comm_id, ProbeStep step, std::uint64_t bytes) {
  transport::Envelope e;
  e.comm_id = comm_id;
  e.collective = Collective::Bootstrap;
  e.count = bytes;
  e.step = step;
  return e;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The mean of the middle half: neither a lucky round nor one stalled for a whole time slice moves it much.
double interquartile_mean(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t drop = values.size() / 4;
  double sum = 0;
  for (std::size_t i = drop; i < values.size() - drop; ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 2 * drop);
}

// The ring a probe runs around: every rank of the group, the ranks inside each host (each host its own
// ring, all at once), or one rank per host. A rank outside it sits the probe out.
struct ProbeRing {
  bool member = false;
  bool times_token = false;  // the first member of its ring: it times the token
  bool last = false;         // the last member: its next is the first
  int next = 0;
  int prev = 0;
  int hops = 1;  // members of this rank's ring
};

ProbeRing ring_among(const std::vector<int>& members, int rank) {
  ProbeRing ring;
  const auto it = std::find(members.begin(), members.end(), rank);
  if (members.size() < 2 || it == members.end()) return ring;
  const auto m = static_cast<int>(members.size());
  const int i = static_cast<int>(it - members.begin());
  ring.member = true;
  ring.times_token = i == 0;
  ring.last = i == m - 1;
  ring.next = members[static_cast<std::size_t>((i + 1) % m)];
  ring.prev = members[static_cast<std::size_t>((i + m - 1) % m)];
  ring.hops = m;
  return ring;
}

// Seconds per hop, on the ring's first member (zero elsewhere): it times a token's trips around.
double probe_hop_latency(transport::Transport& t, const ProbeRing& ring, std::uint64_t comm_id,
                         Deadline deadline) {
  constexpr int kTrips = 30;
  if (!ring.member) return 0;
  std::vector<std::byte> token(8);
  auto envelope = probe_envelope(comm_id, kToken, token.size());
  std::vector<double> trips;
  for (int i = 0; i < kTrips; ++i) {
    auto begin = Clock::now();
    if (ring.times_token) {
      transport::send(t, ring.next, envelope, token, deadline);
      transport::recv(t, ring.prev, envelope, token, deadline);
    } else {
      transport::recv(t, ring.prev, envelope, token, deadline);
      transport::send(t, ring.next, envelope, token, deadline);
    }
    trips.push_back(Seconds(Clock::now() - begin).count());
  }
  // The first trips warm up connections and caches: the median ignores them.
  return ring.times_token ? median(trips) / ring.hops : 0.0;
}

// ---- agreeing around the ring, where its members are all who agree ----
//
// The sample's members are connected around their ring already (the token went round), and the store serves
// the whole group: a text goes to the next member as two messages, its length and its bytes.

void send_text(transport::Transport& t, int peer, std::uint64_t comm_id, const std::string& text,
               Deadline deadline) {
  const std::uint64_t length = text.size();
  transport::send(t, peer, probe_envelope(comm_id, kAgreeLength, sizeof(length)),
                  std::as_bytes(std::span(&length, 1)), deadline);
  transport::send(t, peer, probe_envelope(comm_id, kAgreeText, length), std::as_bytes(std::span(text)),
                  deadline);
}

std::string receive_text(transport::Transport& t, int peer, std::uint64_t comm_id, Deadline deadline) {
  std::uint64_t length = 0;
  transport::recv(t, peer, probe_envelope(comm_id, kAgreeLength, sizeof(length)),
                  std::as_writable_bytes(std::span(&length, 1)), deadline);
  if (length > (std::uint64_t{1} << 20))
    fail(ErrorCode::Protocol, "rank {}: rank {} announced a probe agreement of {} bytes", t.rank(), peer,
         length);
  std::string text(length, '\0');
  transport::recv(t, peer, probe_envelope(comm_id, kAgreeText, length),
                  std::as_writable_bytes(std::span(text)), deadline);
  return text;
}

// "<length>:<text>" for each, back to back.
std::string join_texts(const std::vector<std::string>& texts) {
  std::string joined;
  for (const std::string& text : texts) joined += fmt::format("{}:{}", text.size(), text);
  return joined;
}

std::vector<std::string> split_texts(const std::string& joined, int rank) {
  std::vector<std::string> texts;
  std::size_t at = 0;
  while (at < joined.size()) {
    const std::size_t colon = joined.find(':', at);
    std::size_t length = 0;
    const auto parsed =
        std::from_chars(joined.data() + at, joined.data() + std::min(colon, joined.size()), length);
    if (colon == std::string::npos || parsed.ec != std::errc{} || parsed.ptr != joined.data() + colon ||
        length > joined.size() - colon - 1)
      fail(ErrorCode::Protocol, "rank {}: a malformed probe agreement came around the ring", rank);
    texts.push_back(joined.substr(colon + 1, length));
    at = colon + 1 + length;
  }
  return texts;
}

using Combine = std::function<std::string(const std::vector<std::string>&)>;

// Every member's `mine`, in the ring's order, on its first member (the others return nothing): once around.
std::vector<std::string> gather_around_ring(transport::Transport& t, const ProbeRing& ring,
                                            std::uint64_t comm_id, const std::string& mine,
                                            Deadline deadline) {
  std::vector<std::string> texts;
  if (!ring.times_token) texts = split_texts(receive_text(t, ring.prev, comm_id, deadline), t.rank());
  texts.push_back(mine);
  send_text(t, ring.next, comm_id, join_texts(texts), deadline);
  if (ring.times_token) return split_texts(receive_text(t, ring.prev, comm_id, deadline), t.rank());
  return {};
}

// The first member's `answer` on every member: once around.
std::string pass_around_ring(transport::Transport& t, const ProbeRing& ring, std::uint64_t comm_id,
                             const std::string& answer, Deadline deadline) {
  if (ring.times_token) {
    send_text(t, ring.next, comm_id, answer, deadline);
    return answer;
  }
  std::string got = receive_text(t, ring.prev, comm_id, deadline);
  if (!ring.last) send_text(t, ring.next, comm_id, got, deadline);
  return got;
}

// What the members of `ring` (all who agree) agree on, without the store: every member's `mine` goes around
// the ring once, in the members' order, to the first, which combines them as an agreement through the store
// would (rendezvous::agree_among); its answer goes around once more. Every member returns that answer.
std::string agree_around_ring(transport::Transport& t, const ProbeRing& ring, std::uint64_t comm_id,
                              const std::string& mine, const Combine& combine, Deadline deadline) {
  const std::vector<std::string> texts = gather_around_ring(t, ring, comm_id, mine, deadline);
  return pass_around_ring(t, ring, comm_id, ring.times_token ? combine(texts) : std::string(), deadline);
}

// What every host's sample agrees on at once, without the store, where `hosts` (the ring of the hosts' first
// ranks) holds every host: each host's values gather around its own ring (`ring`) to its first rank, the
// first ranks agree around theirs on all of them, and each passes the answer around its host's ring. The
// combinations (maxima, a conjunction) do not depend on the order the values come in.
std::string agree_within_hosts(transport::Transport& t, const ProbeRing& ring, const ProbeRing& hosts,
                               std::uint64_t comm_id, const std::string& mine, const Combine& combine,
                               Deadline deadline) {
  // A host with one sampled rank has no ring: that rank is its first.
  const bool first = !ring.member || ring.times_token;
  const std::vector<std::string> texts =
      ring.member ? gather_around_ring(t, ring, comm_id, mine, deadline) : std::vector<std::string>{mine};
  std::string answer;
  if (first && hosts.member) {
    const std::array<int, 2> neighbours{hosts.prev, hosts.next};
    t.expect_peers(neighbours);  // the hosts' ring is used here first
  }
  if (first)
    answer = agree_around_ring(
        t, hosts, comm_id, join_texts(texts),
        [&](const std::vector<std::string>& of_hosts) {
          std::vector<std::string> all;
          for (const std::string& host : of_hosts)
            for (std::string& text : split_texts(host, t.rank())) all.push_back(std::move(text));
          return combine(all);
        },
        deadline);
  return ring.member ? pass_around_ring(t, ring, comm_id, answer, deadline) : answer;
}

// How the ranks of a host that measure its links share its cores.
struct CoreTurns {
  int all_busy = 1;        // the turns they take when all of them move a large message at once
  int ranks_per_core = 1;  // how many of them take turns for each core
};

// How the ranks measuring one class of links agree on it.
struct ClassAgreement {
  std::vector<int> members;  // every member of every ring measuring this class at once
  // Where the members are every host's sample and this ring of the hosts' first ranks holds every host:
  // agree_within_hosts, not the store.
  const ProbeRing* hosts = nullptr;
  // Whether the answer is published as the class's key for the ranks outside (else the caller publishes it).
  bool publish = true;
};

// Sends `out` to `to` while receiving `in` from `from`.
void exchange(transport::Transport& t, int to, int from, const transport::Envelope& envelope,
              std::span<const std::byte> out, std::span<std::byte> in, Deadline deadline) {
  t.post_recv(from, envelope, in);
  t.post_send(to, envelope, out);
  std::vector<transport::OpId> completed;
  while (completed.size() < 2) {
    if (!t.progress(deadline, completed))
      fail(ErrorCode::Timeout, "rank {}: the probes of the cost model did not finish in time", t.rank());
  }
}

// Sends `out` to the next member while receiving `in` from the previous one.
void exchange_around_ring(transport::Transport& t, const ProbeRing& ring, const transport::Envelope& envelope,
                          std::span<const std::byte> out, std::span<std::byte> in, Deadline deadline) {
  exchange(t, ring.next, ring.prev, envelope, out, in, deadline);
}

// The share of a small message's alpha that holds a core where two ranks take turns for each: the members
// pair off as recursive doubling does (distance 1, 2, 4, ... among the largest power of two of them; the
// rest sit out), each pair swapping a message at once, a round that costs alpha and what the second
// message on a core holds it for. The median round's cost over alpha, as a share of alpha between 0 (the
// messages overlap wholly) and 1 (they take the core one after the other); timed by the first member
// (alpha is known there), the others say 0, and the combination takes the most.
double probe_alpha_share_on_core(transport::Transport& t, const std::vector<int>& members,
                                 const ProbeRing& ring, std::uint64_t comm_id, double alpha,
                                 Deadline deadline) {
  constexpr int kRounds = 30;
  std::size_t paired = 1, steps = 0;
  for (; paired * 2 <= members.size(); paired *= 2) ++steps;
  const auto i =
      static_cast<std::size_t>(std::find(members.begin(), members.end(), t.rank()) - members.begin());
  if (steps == 0 || i >= paired) return 0;
  std::array<std::byte, 8> out{}, in{};
  const auto envelope = probe_envelope(comm_id, kBusyRound, out.size());
  std::vector<double> times;
  for (int round = 0; round < kRounds; ++round) {
    const int peer = members[i ^ (std::size_t{1} << (static_cast<std::size_t>(round) % steps))];
    const auto begin = Clock::now();
    exchange(t, peer, peer, envelope, out, in, deadline);
    times.push_back(Seconds(Clock::now() - begin).count());
  }
  if (!ring.times_token || alpha <= 0) return 0;
  return std::clamp((median(times) - alpha) / alpha, 0.0, 1.0);
}

// Seconds per byte of one message of `bytes`, as this rank saw it while every rank sent and received
// at once: the mean of the middle half of `rounds` exchanges after a first that does not count, its hop
// latency taken off, divided by the turns its host's ranks took for the cores. The middle half, because a
// collective meets the scheduler's typical orders, not its luckiest (docs/SCHEDULES.md, *The start-up
// probes*).
double probe_loaded_bandwidth(transport::Transport& t, const ProbeRing& ring, ProbeMemory& memory,
                              std::uint64_t comm_id, ProbeStep step, std::size_t bytes, int rounds,
                              double alpha, int turns, Deadline deadline) {
  auto envelope = probe_envelope(comm_id, step, bytes);
  std::vector<double> times;
  for (int round = 0; round <= rounds; ++round) {
    auto begin = Clock::now();
    exchange_around_ring(t, ring, envelope, memory.sent(bytes), memory.received(bytes), deadline);
    if (round > 0) times.push_back(Seconds(Clock::now() - begin).count());
  }
  return std::max(interquartile_mean(times) / turns - alpha, 1e-9) / static_cast<double>(bytes);
}

// Seconds per byte of a float32 sum of `count` elements (received into sent), the fastest of three timings
// of `repeats` in a row.
double probe_reduce(ProbeMemory& memory, std::size_t count, int repeats) {
  float* dst = memory.sums(count).data();
  const float* src = memory.operands(count).data();
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    auto begin = Clock::now();
    for (int r = 0; r < repeats; ++r) reduce_into(DataType::Float32, ReduceOp::Sum, dst, src, count);
    best = std::min(best, Seconds(Clock::now() - begin).count());
  }
  return best / (static_cast<double>(repeats) * static_cast<double>(count * sizeof(float)));
}
// Memory to memory (4 MiB), and within the cache (2 KiB, a host cell's size: the one-shot algorithms').
double probe_reduce(ProbeMemory& memory) {
  return probe_reduce(memory, (4 << 20) / sizeof(float), 1);
}
double probe_reduce_in_cache(ProbeMemory& memory) {
  return probe_reduce(memory, 512, 2000);
}

// What a loopback socket takes without waiting for its reader, once the stream probe grew its buffers: a
// message up to this size moves at the eager rate (docs/SCHEDULES.md, *Eager bytes*, says why 1 MiB).
constexpr std::size_t kEagerBytes = 1 << 20;

// How the two bandwidth probes run, the same on every rank: every rank times one kEagerBytes exchange, and
// rank 0 plans both probes by the slowest rank's pace, so that slow links never make start-up take seconds
// (docs/SCHEDULES.md, *The start-up probes*).
struct ProbePlan {
  std::size_t stream_bytes = 0;
  int eager_rounds = 0;
};

using Agree =
    std::function<std::string(const std::string& key, const std::string& mine, const Combine& combine)>;

ProbePlan agree_on_probe_plan(transport::Transport& t, const ProbeRing& ring, ProbeMemory& memory,
                              const Agree& agree, const std::string& key, std::uint64_t comm_id,
                              Deadline deadline) {
  constexpr std::size_t kSizingBytes = kEagerBytes;
  constexpr std::size_t kMostBytes = ProbeMemory::kBytes;
  constexpr double kRoundSeconds = 0.25;
  constexpr int kMostEagerRounds = 16, kFewestEagerRounds = 3;
  constexpr double kEagerProbeSeconds = 0.5;
  double mine = 0;  // a rank outside the ring says 0: the slowest member plans
  if (ring.member) {
    auto begin = Clock::now();
    exchange_around_ring(t, ring, probe_envelope(comm_id, kSizing, kSizingBytes), memory.sent(kSizingBytes),
                         memory.received(kSizingBytes), deadline);
    mine = Seconds(Clock::now() - begin).count();
  }

  auto plan_the_probes = [&](const std::vector<std::string>& times) {
    double slowest = 0;
    for (std::size_t r = 0; r < times.size(); ++r) {
      double seconds = 0;
      if (std::sscanf(times[r].c_str(), "%la", &seconds) != 1 || !(seconds >= 0))
        fail(ErrorCode::Protocol, "malformed probe time '{}' from rank {} in the store", times[r], r);
      slowest = std::max(slowest, seconds);
    }
    std::size_t bytes = kMostBytes;
    while (bytes > kSizingBytes && slowest * static_cast<double>(bytes / kSizingBytes) > kRoundSeconds)
      bytes /= 2;
    const double affordable = slowest > 0 ? kEagerProbeSeconds / slowest : kMostEagerRounds;
    return fmt::format(
        "{} {}", bytes,
        static_cast<int>(std::clamp<double>(affordable, kFewestEagerRounds, kMostEagerRounds)));
  };
  const std::string text = agree(key, fmt::format("{:a}", mine), plan_the_probes);
  ProbePlan plan;
  if (std::sscanf(text.c_str(), "%zu %d", &plan.stream_bytes, &plan.eager_rounds) != 2 ||
      plan.stream_bytes < kSizingBytes || plan.stream_bytes > kMostBytes ||
      plan.eager_rounds < kFewestEagerRounds || plan.eager_rounds > kMostEagerRounds)
    fail(ErrorCode::Protocol, "malformed probe plan '{}' in the store", text);
  return plan;
}

// alpha and its share on a core are the largest of the rings' (the first member of each ring times them,
// the others say 0); beta, beta_eager and both gammas the slowest rank's (a rank outside the ring says 0).
std::string combine(const std::vector<std::string>& measured) {
  MeasuredLink combined = decode_measured_link(measured.front());
  LinkCost& link = combined.link;
  for (std::size_t r = 1; r < measured.size(); ++r) {
    const MeasuredLink theirs = decode_measured_link(measured[r]);
    link.alpha = std::max(link.alpha, theirs.link.alpha);
    link.beta = std::max(link.beta, theirs.link.beta);
    link.beta_eager = std::max(link.beta_eager, theirs.link.beta_eager);
    link.eager_bytes = std::max(link.eager_bytes, theirs.link.eager_bytes);
    link.alpha_share_on_core = std::max(link.alpha_share_on_core, theirs.link.alpha_share_on_core);
    combined.gamma = std::max(combined.gamma, theirs.gamma);
    combined.gamma_in_cache = std::max(combined.gamma_in_cache, theirs.gamma_in_cache);
  }
  // A byte that fits the socket never costs more than one that streams (a noisy probe aside).
  link.beta_eager = std::min(link.beta_eager, link.beta);
  return encode(combined);
}

// One class of links, measured around the ring of `ring_members` with every member at once, and agreed
// among `agreement.members` (the members of every ring measuring this class at once; every rank reads the
// answer, encoded, which this returns): around the ring where it is the only one, around every host's ring
// and the hosts' ring where `agreement.hosts` says so (the first member of the ring that ends it then
// publishes the answer as `key` for the others: the sampled ranks make no store request for the probe, the
// others one), else through the store; `turns` says how this rank's host shares its cores.
std::string measure_links(transport::Transport& transport, ProbeMemory& memory,
                          const std::vector<int>& ring_members, const ClassAgreement& agreement,
                          const CoreTurns& turns, double gamma, double gamma_in_cache, Store& store,
                          const std::string& key, std::uint64_t comm_id, Deadline deadline) {
  const std::vector<int>& members = agreement.members;
  const ProbeRing ring = ring_among(ring_members, transport.rank());
  const bool one_ring = ring_members == members;
  const Agree agree = [&](const std::string& what, const std::string& mine, const Combine& how) {
    if (one_ring && ring.member) return agree_around_ring(transport, ring, comm_id, mine, how, deadline);
    if (agreement.hosts)
      return agree_within_hosts(transport, ring, *agreement.hosts, comm_id, mine, how, deadline);
    return rendezvous::agree_among(store, what, transport.rank(), members, mine, how);
  };
  // Who publishes the answer for the ranks outside: the first of the ring that ends the agreement.
  const bool publishes =
      agreement.publish && (one_ring ? ring.times_token : agreement.hosts && agreement.hosts->times_token);
  if (ring.member) {
    const std::array<int, 2> neighbours{ring.prev, ring.next};
    transport.expect_peers(neighbours);  // where both are dialled, one store request learns both addresses
  }
  MeasuredLink mine;
  mine.gamma = gamma;
  mine.gamma_in_cache = gamma_in_cache;
  LinkCost& link = mine.link;
  link.alpha = probe_hop_latency(transport, ring, comm_id, deadline);
  // Through shared memory (shm+tcp, shm+verbs) no share of alpha takes a core. Over sockets it is measured
  // where two ranks take turns for each core; where more do, all of it: there the probe's swaps overlap
  // far more than a collective's rounds (8 ranks on 2 cores: recursive doubling measured 2-3 times its
  // prediction from the probe; docs/SCHEDULES.md, *Ranks sharing cores*); where the ranks fit their cores the
  // share does not matter.
  const bool through_memory = transport.name().starts_with("shm+");
  link.alpha_share_on_core = 0;
  if (ring.member && !through_memory)
    link.alpha_share_on_core =
        turns.ranks_per_core == 2
            ? probe_alpha_share_on_core(transport, ring_members, ring, comm_id, link.alpha, deadline)
            : (ring.times_token ? 1.0 : 0.0);
  // Only those who agree need the plan (a rank of `members` outside every ring says 0 in it).
  const bool agrees = std::find(members.begin(), members.end(), transport.rank()) != members.end();
  const ProbePlan plan =
      agrees ? agree_on_probe_plan(transport, ring, memory, agree, key + "/plan", comm_id, deadline)
             : ProbePlan{};
  if (ring.member) {
    link.beta = probe_loaded_bandwidth(transport, ring, memory, comm_id, kBulk, plan.stream_bytes, 3,
                                       link.alpha, turns.all_busy, deadline);
    link.beta_eager = probe_loaded_bandwidth(transport, ring, memory, comm_id, kEager, kEagerBytes,
                                             plan.eager_rounds, link.alpha, turns.all_busy, deadline);
    link.eager_bytes = kEagerBytes;
  } else {
    link.beta = link.beta_eager = 0;
  }
  if (!agrees) return store.get(key);
  const std::string answer = agree(key, encode(mine), combine);
  if (publishes) store.set(key, answer);  // for the ranks outside the rings
  return answer;
}

// Where the layout has both classes of links (several hosts, some with several ranks), each is measured
// apart: inside every host at once, then between hosts, one rank of each (its host's first) sending to
// the next host's; otherwise the one class there is, around the ring of every rank, stands for both.
// The first kProbeSample members of a ring: a link's cost is as well measured by a few pairs as by all,
// and a ring of hundreds of ranks would take seconds (and, with connections on first use, make links no
// call needs). Its members are consecutive ranks where they can be, whose links a ring all-reduce uses.
constexpr std::size_t kProbeSample = 8;

std::vector<int> sample_of(std::vector<int> members) {
  if (members.size() > kProbeSample) members.resize(kProbeSample);
  return members;
}

// How the sampled ranks of this rank's host share its cores.
CoreTurns turns_of_sample(const HostLayout& hosts, const std::vector<int>& sample, int rank) {
  const auto it = std::find(sample.begin(), sample.end(), rank);
  if (it == sample.end() || hosts.host_of_rank.empty()) return {};
  const HostLayout sampled = hosts.subset(sample);
  const int host = sampled.host_of(static_cast<int>(it - sample.begin()));
  return {sampled.turns_when_all_busy(host), sampled.ranks_per_core(host)};
}

LinkModel measure(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                  const HostLayout& hosts, Deadline deadline) {
  const int rank = transport.rank();
  std::vector<int> everyone(static_cast<std::size_t>(transport.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  std::vector<int> first_of_host, my_host;
  for (int r = 0; r < transport.size(); ++r) {
    if (hosts.local_rank_of(r) == 0) first_of_host.push_back(r);
    if (hosts.host_of(r) == hosts.host_of(rank)) my_host.push_back(r);
  }
  const bool several_hosts = first_of_host.size() > 1;
  const bool shared_hosts = first_of_host.size() < everyone.size();
  const bool one_class = !several_hosts || !shared_hosts;
  // Only the sampled ranks' figures count, so only they time a reduction.
  const bool sampled = static_cast<std::size_t>(one_class ? rank : hosts.local_rank_of(rank)) < kProbeSample;
  ProbeMemory memory;
  const double gamma = sampled ? probe_reduce(memory) : 0;
  const double gamma_in_cache = sampled ? probe_reduce_in_cache(memory) : 0;

  LinkModel model;
  if (one_class) {
    const std::vector<int> sample = sample_of(everyone);
    const MeasuredLink every = decode_measured_link(
        measure_links(transport, memory, sample, ClassAgreement{sample}, turns_of_sample(hosts, sample, rank),
                      gamma, gamma_in_cache, store, "cost_model", comm_id, deadline));
    model.set_every_link(every.link);
    model.gamma = every.gamma;
    model.gamma_in_cache = every.gamma_in_cache;
    return model;
  }
  // Every host's sample measures its own links at once, and all the samples agree on one figure.
  std::vector<int> within_members;
  for (int r = 0; r < transport.size(); ++r)
    if (static_cast<std::size_t>(hosts.local_rank_of(r)) < kProbeSample) within_members.push_back(r);
  const std::vector<int> host_sample = sample_of(my_host);
  const std::vector<int> hosts_sample = sample_of(first_of_host);
  // Where the ring of the hosts' first ranks holds every host, the samples agree around their rings (each
  // host's, then the hosts'), and a host's first rank brings the figures between hosts back around its
  // host's ring: the sampled ranks then make no request for the probe. With more hosts, through the store.
  const bool every_host_in_ring = first_of_host.size() <= kProbeSample;
  const ProbeRing hosts_ring = ring_among(hosts_sample, rank);
  const ProbeRing host_ring = ring_among(host_sample, rank);
  const bool measures_between =
      std::find(hosts_sample.begin(), hosts_sample.end(), rank) != hosts_sample.end();
  // Rank 0 ends both agreements there and publishes both answers in one key for the ranks outside the
  // samples; through the store, each agreement publishes its own.
  const std::string both_key = "cost_model/hosts";
  std::string within_text, between_text;
  if (!sampled) {
    // Outside both samples (a host's first ranks make both): both answers in one request.
    if (every_host_in_ring) {
      const std::vector<std::string> answers = split_texts(store.get(both_key), rank);
      if (answers.size() != 2)
        fail(ErrorCode::Protocol, "rank {}: malformed '{}' in the store", rank, both_key);
      within_text = answers[0];
      between_text = answers[1];
    } else {
      const std::vector<std::string> answers = store.get_many({"cost_model/within", "cost_model/between"});
      within_text = answers[0];
      between_text = answers[1];
    }
  } else {
    within_text = measure_links(
        transport, memory, host_sample,
        ClassAgreement{within_members, every_host_in_ring ? &hosts_ring : nullptr, !every_host_in_ring},
        turns_of_sample(hosts, host_sample, rank), gamma, gamma_in_cache, store, "cost_model/within", comm_id,
        deadline);
    if (measures_between || !every_host_in_ring)
      between_text = measure_links(transport, memory, hosts_sample,
                                   ClassAgreement{hosts_sample, nullptr, !every_host_in_ring}, CoreTurns{},
                                   gamma, gamma_in_cache, store, "cost_model/between", comm_id, deadline);
    if (every_host_in_ring && hosts_ring.times_token)
      store.set(both_key, join_texts({within_text, between_text}));
    if (every_host_in_ring && host_ring.member)
      between_text = pass_around_ring(transport, host_ring, comm_id, between_text, deadline);
  }
  const MeasuredLink within = decode_measured_link(within_text);
  const MeasuredLink between = decode_measured_link(between_text);
  model.within_host = within.link;
  model.between_hosts = between.link;
  model.between_hosts.alpha_share_on_core = 1;  // its ring's messages cross between hosts
  model.gamma = std::max(within.gamma, between.gamma);
  model.gamma_in_cache = std::max(within.gamma_in_cache, between.gamma_in_cache);
  return model;
}

}  // namespace

LinkModel calibrate_link_model(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                               const HostLayout& hosts, std::string_view fixed_text, Deadline deadline) {
  LinkModel link;
  const auto begin = Clock::now();
  if (!fixed_text.empty())
    link = parse_cost_model(fixed_text);
  else if (transport.size() >= 2)
    link = measure(transport, store, comm_id, hosts, deadline);
  // How long the probe took on rank 0 is part of forming a group: canopy-bench's INFO split shows it so.
  if (transport.rank() == 0)
    log::info("cost model ({} in {:.2f} s on rank 0): {}",
              fixed_text.empty() ? "probed" : "CANOPY_COST_MODEL", Seconds(Clock::now() - begin).count(),
              describe(link, hosts));
  return link;
}

}  // namespace canopy::collectives
