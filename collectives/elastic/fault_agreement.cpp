#include "collectives/elastic/fault_agreement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>

#include "common/error.hpp"

namespace canopy::collectives {
namespace {

// Each rank sets "vote/<rank>" (its flags); the first rank that can decide writes "decision" with
// compare_set, and every rank returns what that key holds.
constexpr const char* kDecision = "decision";
constexpr std::string_view kAgreed = "agreed ";
constexpr std::string_view kMismatch = "mismatch: ";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

template <typename T>
bool parse_number(std::string_view text, T& value, int base = 10) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

// The decision this rank can make now: once every rank has voted or will never vote (asked of each
// absent rank every round, so that its silence is timed from the first round on); nullopt before.
std::optional<Agreement> decide(Store& store, const std::vector<std::string>& vote_keys,
                                const AgreementRound& round, PeerSilence& silence) {
  std::vector<std::optional<std::string>> votes(vote_keys.size());
  if (store.check(vote_keys)) {  // the common case: one request to know, one to read them all
    const std::vector<std::string> values = store.get_many(vote_keys, Duration(1000));
    for (std::size_t r = 0; r < values.size(); ++r) votes[r] = values[r];
  } else {
    for (std::size_t r = 0; r < vote_keys.size(); ++r)
      if (store.check({vote_keys[r]})) votes[r] = store.get(vote_keys[r]);
  }
  const bool late = round.deadline.expired();
  Agreement decision;
  bool complete = true;
  for (int rank = 0; rank < round.size; ++rank) {
    if (const auto& vote = votes[static_cast<std::size_t>(rank)]) {
      // "<purpose> <flags>": ranks that called different things here are told so, every one of them.
      const std::size_t space = vote->rfind(' ');
      std::uint32_t flags = 0;
      if (space == std::string::npos || !parse_number(std::string_view(*vote).substr(space + 1), flags, 16))
        fail(ErrorCode::Protocol, "agreement: rank {} voted '{}', not a purpose and flags", rank, *vote);
      const std::string purpose = vote->substr(0, space);
      if (purpose != round.purpose && decision.mismatch.empty())
        decision.mismatch = fmt::format("ranks disagree on what this is: rank {} came for {}, rank {} for {}",
                                        rank, purpose, round.rank, round.purpose);
      decision.participants.push_back(rank);
      decision.value &= flags;
      continue;
    }
    std::string why = silence.gone(rank);
    if (why.empty() && late) why = fmt::format("rank {} did not take part before the deadline", rank);
    if (why.empty()) complete = false;
    decision.left_out.emplace_back(rank, std::move(why));
  }
  if (!complete) return std::nullopt;
  return decision;
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
  if (!mismatch.empty()) text += fmt::format("{}{}\n", kMismatch, one_line(mismatch));
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
    if (starts_with(line, kMismatch)) {
      agreement.mismatch = line.substr(kMismatch.size());
      continue;
    }
    const std::size_t space = line.find(' ');
    int r = -1;
    if (space == std::string::npos || !parse_number(std::string_view(line).substr(0, space), r)) malformed();
    agreement.left_out.emplace_back(r, line.substr(space + 1));
  }
  return agreement;
}

Agreement agree_in_store(Store& store, const AgreementRound& round, std::uint32_t flags, PeerSilence& silence) {
  std::vector<std::string> vote_keys;
  for (int rank = 0; rank < round.size; ++rank) vote_keys.push_back(fmt::format("vote/{}", rank));
  try {
    // A plain set: a rank killed while voting holds no lock (a FileStore locks a key for compare_set).
    store.set(vote_keys[static_cast<std::size_t>(round.rank)], fmt::format("{} {:x}", round.purpose, flags));
    for (;;) {
      std::string closed;
      if (store.check({kDecision})) {
        closed = store.get(kDecision);
      } else if (std::optional<Agreement> decision = decide(store, vote_keys, round, silence)) {
        try {
          closed = store.compare_set(kDecision, "", decision->encode());  // the first decision wins
        } catch (const Error& e) {
          // A FileStore's lock left by a rank killed inside compare_set: broken when stale, so try again.
          if (e.code() != ErrorCode::Timeout || round.deadline.expired()) throw;
          continue;
        }
      } else {
        try {
          const auto left = std::chrono::duration_cast<Duration>(round.deadline.remaining());
          store.wait({kDecision}, std::clamp(left, Duration(1), round.poll));
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Timeout) throw;
        }
        continue;
      }
      Agreement agreement = Agreement::decode(closed);
      if (!agreement.mismatch.empty())
        fail(ErrorCode::Mismatch, "rank {}: {}: {} (every rank must call agree and shrink in the same order)",
             round.rank, round.what, agreement.mismatch);
      if (!std::binary_search(agreement.participants.begin(), agreement.participants.end(), round.rank))
        fail(ErrorCode::Revoked,
             "rank {}: {} was decided without this rank: the others counted it as failed, so it is no longer "
             "a member (ranks {} took part)",
             round.rank, round.what, fmt::join(agreement.participants, ", "));
      return agreement;
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Revoked || e.code() == ErrorCode::Protocol || e.code() == ErrorCode::Mismatch)
      throw;
    fail(ErrorCode::PeerFailed,
         "rank {}: {} cannot be decided: the store failed ({}); an agreement survives ranks that die, not a "
         "store that does",
         round.rank, round.what, e.what());
  }
}

}  // namespace canopy::collectives
