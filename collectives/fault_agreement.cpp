#include "collectives/fault_agreement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

#include "common/error.hpp"

namespace canopy::collectives {
namespace {

constexpr const char* kState = "state";      // "votes 0=ffffffff 2=1", then the decision
constexpr const char* kDecided = "decided";  // set once the state closed: wakes the waiters at once
constexpr std::string_view kVotes = "votes";
constexpr std::string_view kAgreed = "agreed ";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

template <typename T>
bool parse_number(std::string_view text, T& value, int base = 10) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

// The votes in an open state ("" before the first one), by rank.
std::map<int, std::uint32_t> parse_votes(const std::string& state, int size) {
  std::map<int, std::uint32_t> votes;
  if (state.empty()) return votes;
  std::istringstream words(state);
  std::string word;
  words >> word;
  if (word != kVotes) fail(ErrorCode::Protocol, "agreement: the store holds '{}', not votes", state);
  while (words >> word) {
    const std::size_t equals = word.find('=');
    int rank = -1;
    std::uint32_t flags = 0;
    if (equals == std::string::npos || !parse_number(std::string_view(word).substr(0, equals), rank) ||
        !parse_number(std::string_view(word).substr(equals + 1), flags, 16) || rank < 0 || rank >= size)
      fail(ErrorCode::Protocol, "agreement: malformed vote '{}' in '{}'", word, state);
    votes[rank] = flags;
  }
  return votes;
}

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace

// "agreed <value hex>\n<participants, comma-separated>\n<rank> <why>\n...": readable with a store's client.
std::string Agreement::encode() const {
  std::string text = fmt::format("{}{:x}\n{}\n", kAgreed, value, fmt::join(participants, ","));
  for (const auto& [rank, why] : left_out) text += fmt::format("{} {}\n", rank, one_line(why));
  return text;
}

Agreement Agreement::decode(const std::string& text) {
  Agreement agreement;
  std::istringstream lines(text);
  std::string line;
  const auto malformed = [&] { fail(ErrorCode::Protocol, "agreement: malformed decision '{}'", text); };
  if (!std::getline(lines, line) || !starts_with(line, kAgreed) ||
      !parse_number(std::string_view(line).substr(kAgreed.size()), agreement.value, 16))
    malformed();
  if (!std::getline(lines, line)) malformed();
  std::istringstream ranks(line);
  for (std::string rank; std::getline(ranks, rank, ',');) {
    int r = -1;
    if (!parse_number(std::string_view(rank), r)) malformed();
    agreement.participants.push_back(r);
  }
  while (std::getline(lines, line)) {
    const std::size_t space = line.find(' ');
    int r = -1;
    if (space == std::string::npos || !parse_number(std::string_view(line).substr(0, space), r)) malformed();
    agreement.left_out.emplace_back(r, line.substr(space + 1));
  }
  return agreement;
}

Agreement agree_in_store(Store& store, const AgreementRound& round, std::uint32_t flags, PeerSilence& silence) {
  const std::string my_vote = fmt::format(" {}={:x}", round.rank, flags);
  try {
    std::string state = store.compare_set(kState, "", std::string(kVotes) + my_vote);
    for (;;) {
      if (starts_with(state, kAgreed)) {
        Agreement agreement = Agreement::decode(state);
        if (!std::binary_search(agreement.participants.begin(), agreement.participants.end(), round.rank))
          fail(ErrorCode::Revoked,
               "rank {}: {} was decided without this rank: the others counted it as failed, so it is no longer "
               "a member (ranks {} took part)",
               round.rank, round.what, fmt::join(agreement.participants, ", "));
        return agreement;
      }
      const std::map<int, std::uint32_t> votes = parse_votes(state, round.size);
      if (votes.count(round.rank) == 0) {  // another vote landed first: add this one to what is there now
        state = store.compare_set(kState, state, state.empty() ? std::string(kVotes) + my_vote : state + my_vote);
        continue;
      }
      // Closed only once every rank has voted or will never vote; every absent rank is asked every round,
      // so that its silence is timed from the first round on.
      const bool late = round.deadline.expired();
      Agreement decision;
      bool complete = true;
      for (int rank = 0; rank < round.size; ++rank) {
        if (auto vote = votes.find(rank); vote != votes.end()) {
          decision.participants.push_back(rank);
          decision.value &= vote->second;
          continue;
        }
        std::string why = silence.gone(rank);
        if (why.empty() && late) why = fmt::format("rank {} did not take part before the deadline", rank);
        if (why.empty()) complete = false;
        decision.left_out.emplace_back(rank, std::move(why));
      }
      if (complete) {
        const std::string closed = decision.encode();
        state = store.compare_set(kState, state, closed);
        if (state == closed) store.set(kDecided, "1");
        continue;
      }
      try {
        const auto left = std::chrono::duration_cast<Duration>(round.deadline.remaining());
        store.wait({kDecided}, std::clamp(left, Duration(1), round.poll));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout) throw;
      }
      state = store.get(kState);
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Revoked || e.code() == ErrorCode::Protocol) throw;
    fail(ErrorCode::PeerFailed, "rank {}: {} cannot be decided: the store failed ({}); an agreement survives "
         "ranks that die, not a store that does", round.rank, round.what, e.what());
  }
}

}  // namespace canopy::collectives
