// Measuring the alpha-beta-gamma model on the group that will use it, at start-up.
//
// Every probe runs on all ranks at once, because that is how collectives load the machine: a ring
// all-reduce has every rank sending and receiving at the same time, so P ranks of one host share its
// loopback (and its cores), and P nodes share nothing but their own links. A probe between two ranks
// while the others sit idle would be optimistic by about a factor of P/2 on one host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "canopy/store.hpp"
#include "collectives/selection/link_model_text.hpp"
#include "collectives/schedules/host_layout.hpp"
#include "collectives/schedules/simulator.hpp"
#include "common/deadline.hpp"
#include "transport/transport.hpp"

namespace canopy::collectives {

// alpha: a token passed around the ring of all ranks (the time of one hop, waking one process);
// beta: every rank sends 16 MiB to its successor while receiving 16 MiB from its predecessor (the
//       slowest rank's rate: a collective waits for its slowest link); less (down to 1 MiB) where a
//       round of 16 MiB would take over 250 ms, judged by one 1 MiB exchange first;
// beta_eager: the same with messages of LinkModel::eager_bytes (1 MiB), which sockets take at once (fewer
//       rounds where links are slow);
// gamma: every rank sums 4 MiB of float32 at the same time (the slowest rank's rate).
// Alpha is the median of its trips and each beta the mean of the middle half of its rounds: where ranks
// share cores, the fastest round is a lucky order of the scheduler's that collectives seldom meet (gamma,
// a sum in memory, is the fastest of three). Where a host's ranks outnumber its cores, the simulator
// gives each message's bytes two of them (the copies at both ends); the exchanges' times are divided by
// the turns the ranks took (HostLayout::turns_when_all_busy), so that the model, run on the probe,
// predicts what the probe measured.
// Where `hosts` has both classes of links (several hosts, some of them with several ranks), the links
// within hosts are measured so around each host's ranks (all hosts at once), then the links between
// hosts around one rank of each host; otherwise the ring of every rank measures the one class there is,
// and its figures stand for both.
// Each rank publishes what it measured in `store`; every rank returns the same combined figures.
// A `fixed_model` (CANOPY_COST_MODEL, parse_cost_model in link_model_text.hpp) fixes the figures instead.
LinkModel calibrate_link_model(transport::Transport& transport, Store& store, std::uint64_t comm_id,
                               const HostLayout& hosts, std::string_view fixed_model, Deadline deadline);

}  // namespace canopy::collectives
