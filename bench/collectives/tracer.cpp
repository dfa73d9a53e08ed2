#include "bench/collectives/tracer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "collectives/schedules/host_groups.hpp"

namespace canopy::bench {

using namespace canopy::collectives;  // a view of collectives' simulation: its types throughout

namespace {

constexpr std::size_t kLineWidth = 110;

// Whether the call's layout puts several ranks on some host (and so has messages of both classes).
bool shows_hosts(const CollectiveCall& call) {
  const HostGroups groups(call);
  return groups.largest() > 1 && groups.hosts() > 1;
}

// "0 -> 1 [0..8)"; a message between hosts, where the layout has both classes, is "0 => 4 [0..8)".
std::string describe_transfer(const TransferEvent& transfer, const CollectiveCall& call) {
  const HostLayout& hosts = call.layout();
  const bool across = !hosts.host_of_rank.empty() &&
                      hosts.host_of(transfer.from) != hosts.host_of(transfer.to) && shows_hosts(call);
  const char* arrow = across ? "=>" : "->";
  if (transfer.block.count == 0) return fmt::format("{} {} {} signal", transfer.from, arrow, transfer.to);
  // Out of place, a message read straight from the caller's input says so.
  const char* buffer = transfer.block.buffer == Buffer::Data    ? ""
                       : transfer.block.buffer == Buffer::Input ? "input"
                                                                : "staging";
  return fmt::format("{} {} {} {}[{}..{})", transfer.from, arrow, transfer.to, buffer, transfer.block.offset,
                     transfer.block.offset + transfer.block.count);
}

// "hosts 0: 0 1 2 3 | 1: 4 5 6 7"
std::string describe_hosts(const CollectiveCall& call) {
  const HostGroups groups(call);
  std::string text = "hosts";
  for (int host = 0; host < groups.hosts(); ++host)
    text += fmt::format("{} {}: {}", host == 0 ? "" : " |", host, fmt::join(groups.members(host), " "));
  return text;
}

std::string describe_call(const Simulation& simulation, const CollectiveCall& call) {
  std::string what =
      fmt::format("{} on {} ranks, {} elements", to_string(call.collective), call.size, call.count);
  if (call.collective == Collective::AllGather || call.collective == Collective::ReduceScatter) {
    what += " per rank";
  }
  if (call.collective == Collective::Broadcast || call.collective == Collective::Reduce) {
    what += fmt::format(", root {}", call.root);
  }
  std::string text = fmt::format("{} in chunks of {}: {} messages in {} rounds, predicted {}", what,
                                 call.chunk_count, simulation.transfers.size(), simulation.rounds,
                                 format_seconds(simulation.predicted_seconds));
  if (shows_hosts(call)) {
    const auto across = std::count_if(
        simulation.transfers.begin(), simulation.transfers.end(),
        [&](const auto& t) { return call.layout().host_of(t.from) != call.layout().host_of(t.to); });
    text += fmt::format("; {} of them between hosts (=>)", across);
  }
  return text;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string format_seconds(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude == 0) return "0 s";
  if (magnitude < 1e-6) return fmt::format("{:.3g} ns", seconds * 1e9);
  if (magnitude < 1e-3) return fmt::format("{:.3g} us", seconds * 1e6);
  if (magnitude < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} s", seconds);
}

std::string trace_text(const Simulation& simulation, const CollectiveCall& call) {
  std::map<int, std::vector<const TransferEvent*>> by_round;
  for (const TransferEvent& transfer : simulation.transfers) by_round[transfer.round].push_back(&transfer);
  std::string text = fmt::format("{}\n", describe_call(simulation, call));
  if (shows_hosts(call)) text += describe_hosts(call) + "\n";
  for (auto& [round, transfers] : by_round) {
    std::stable_sort(transfers.begin(), transfers.end(), [](const TransferEvent* a, const TransferEvent* b) {
      return a->start != b->start ? a->start < b->start : a->from < b->from;
    });
    std::string line = fmt::format("round {}:", round);
    const std::size_t indent = line.size();
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      const std::string item =
          fmt::format(" {}{}", describe_transfer(*transfers[i], call), i + 1 < transfers.size() ? "," : "");
      if (line.size() + item.size() > kLineWidth) {
        text += fmt::format("{}\n", line);
        line.assign(indent, ' ');
      }
      line += item;
    }
    text += fmt::format("{}\n", line);
  }
  return text;
}

std::string trace_svg(const Simulation& simulation, const CollectiveCall& call) {
  constexpr double kLeft = 70, kRight = 20, kTop = 40, kLane = 36, kWidth = 960;
  const bool by_round = simulation.predicted_seconds <= 0;
  const double span = by_round ? std::max(1, simulation.rounds) : simulation.predicted_seconds;
  const double height = kTop + kLane * std::max(1, call.size) + 50;
  auto x_of = [&](double t) { return kLeft + (kWidth - kLeft - kRight) * t / span; };
  // Lanes host after host (the ring order), so that a host's ranks sit together whatever their numbers.
  const HostGroups groups(call);
  const std::vector<int> lanes = groups.ring_order();
  std::vector<int> lane_of(lanes.size());
  for (std::size_t lane = 0; lane < lanes.size(); ++lane)
    lane_of[static_cast<std::size_t>(lanes[lane])] = static_cast<int>(lane);
  auto y_of = [&](int rank) { return kTop + kLane * (lane_of[static_cast<std::size_t>(rank)] + 0.5); };
  const double data_count = std::max<double>(1, static_cast<double>(call.data_count()));

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
      "markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" "
      "fill=\"context-stroke\"/></marker></defs>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"14\">{3}</text>\n",
      kWidth, height, kLeft, escape_xml(describe_call(simulation, call)));
  if (shows_hosts(call)) {
    // Every other host on a grey band, named at its right end.
    int first_lane = 0;
    for (int host = 0; host < groups.hosts(); ++host) {
      const auto ranks = static_cast<int>(groups.members(host).size());
      svg += fmt::format(
          "<rect x=\"0\" y=\"{0}\" width=\"{1}\" height=\"{2}\" fill=\"{3}\"/>"
          "<text x=\"{4}\" y=\"{5}\" text-anchor=\"end\" fill=\"#888\">host {6}</text>\n",
          kTop + kLane * first_lane, kWidth, kLane * ranks, host % 2 == 0 ? "#f2f2f2" : "white", kWidth - 4,
          kTop + kLane * first_lane + 12, host);
      first_lane += ranks;
    }
  }
  for (int rank = 0; rank < call.size; ++rank) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ccc\"/>"
        "<text x=\"10\" y=\"{3}\">rank {4}</text>\n",
        kLeft, y_of(rank), kWidth - kRight, y_of(rank) + 4, rank);
  }
  // The time (or round) axis with five ticks.
  const double axis_y = kTop + kLane * call.size + 15;
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft, axis_y,
                     kWidth - kRight);
  for (int tick = 0; tick <= 4; ++tick) {
    const double t = span * tick / 4;
    const std::string label = by_round ? fmt::format("round {:g}", t) : format_seconds(t);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x_of(t), axis_y, axis_y + 5, axis_y + 20, label);
  }
  for (const TransferEvent& transfer : simulation.transfers) {
    const double start = by_round ? transfer.round - 1 : transfer.start;
    const double finish = by_round ? transfer.round : transfer.finish;
    // Hue from the middle of the carried range: the same chunk keeps its colour hop after hop.
    // (An Input block is placed where its elements sit in Data.)
    CollectiveCall sender = call;
    sender.rank = transfer.from;
    const std::uint64_t offset =
        transfer.block.offset + (transfer.block.buffer == Buffer::Input ? sender.input_offset() : 0);
    const double middle = static_cast<double>(offset) + static_cast<double>(transfer.block.count) / 2;
    const double hue = transfer.block.count == 0 ? 0 : 300.0 * middle / data_count;
    const char* saturation = transfer.block.count == 0 ? "0%" : "75%";
    svg += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"hsl({:.0f},{},42%)\" "
        "stroke-width=\"2\" marker-end=\"url(#head)\"><title>{} (round {}, {} bytes, {} .. "
        "{})</title></line>\n",
        x_of(start), y_of(transfer.from), x_of(finish), y_of(transfer.to), hue, saturation,
        escape_xml(describe_transfer(transfer, call)), transfer.round, transfer.bytes,
        format_seconds(transfer.start), format_seconds(transfer.finish));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace canopy::bench
