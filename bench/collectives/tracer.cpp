#include "bench/collectives/tracer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace canopy::bench {

using namespace canopy::collectives;  // a view of collectives' simulation: its types throughout

namespace {

constexpr std::size_t kLineWidth = 110;

std::string describe_transfer(const TransferEvent& transfer) {
  if (transfer.block.count == 0) return fmt::format("{} -> {} signal", transfer.from, transfer.to);
  // Out of place, a message read straight from the caller's input says so.
  const char* buffer = transfer.block.buffer == Buffer::Data    ? ""
                       : transfer.block.buffer == Buffer::Input ? "input"
                                                                : "staging";
  return fmt::format("{} -> {} {}[{}..{})", transfer.from, transfer.to, buffer, transfer.block.offset,
                     transfer.block.offset + transfer.block.count);
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
  return fmt::format("{} in chunks of {}: {} messages in {} rounds, predicted {}", what, call.chunk_count,
                     simulation.transfers.size(), simulation.rounds,
                     format_seconds(simulation.predicted_seconds));
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
  for (auto& [round, transfers] : by_round) {
    std::stable_sort(transfers.begin(), transfers.end(), [](const TransferEvent* a, const TransferEvent* b) {
      return a->start != b->start ? a->start < b->start : a->from < b->from;
    });
    std::string line = fmt::format("round {}:", round);
    const std::size_t indent = line.size();
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      const std::string item =
          fmt::format(" {}{}", describe_transfer(*transfers[i]), i + 1 < transfers.size() ? "," : "");
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
  auto y_of = [&](int rank) { return kTop + kLane * (rank + 0.5); };
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
        escape_xml(describe_transfer(transfer)), transfer.round, transfer.bytes,
        format_seconds(transfer.start), format_seconds(transfer.finish));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace canopy::bench
