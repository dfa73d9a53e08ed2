#include "bench/collectives/selection.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "collectives/schedules/algorithms.hpp"

namespace canopy::bench {
namespace {

const std::vector<Collective>& every_collective() {
  static const std::vector<Collective> all{Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
                                           Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                                           Collective::Gather,    Collective::Scatter,       Collective::Barrier};
  return all;
}

std::string known_algorithms(Collective collective) {
  std::string names;
  for (const auto& a : collectives::algorithms(collective))
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

}  // namespace

std::string command_name(Collective collective) {
  switch (collective) {
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Reduce:
      return "reduce";
    case Collective::AllReduce:
      return "allreduce";
    case Collective::AllGather:
      return "allgather";
    case Collective::ReduceScatter:
      return "reducescatter";
    case Collective::Barrier:
      return "barrier";
    case Collective::AllToAll:
      return "alltoall";
    case Collective::Gather:
      return "gather";
    case Collective::Scatter:
      return "scatter";
    default:
      return std::string(to_string(collective));
  }
}

std::vector<Collective> collectives_named(const std::string& name) {
  if (name == "all") return every_collective();
  std::string known;
  for (Collective c : every_collective()) {
    if (command_name(c) == name) return {c};
    known += command_name(c) + ", ";
  }
  throw std::invalid_argument(fmt::format("unknown collective '{}' (known: {}all)", name, known));
}

std::vector<std::string> algorithms_for(Collective collective, const std::string& list, bool allow_auto) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (name == "all") {  // every algorithm; "all,auto" adds auto's choice beside them
      for (const auto& a : collectives::algorithms(collective)) names.emplace_back(a.name);
      continue;
    }
    bool known = (allow_auto && name == "auto") || collectives::find_algorithm(collective, name) != nullptr;
    if (!known)
      throw std::invalid_argument(fmt::format("{} has no algorithm '{}' (known: {}{})",
                                              command_name(collective), name, known_algorithms(collective),
                                              allow_auto ? ", all, auto" : ", all"));
    names.push_back(name);
  }
  if (names.empty()) throw std::invalid_argument(fmt::format("--algo '{}' names no algorithm", list));
  return names;
}

}  // namespace canopy::bench
