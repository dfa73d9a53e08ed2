#include "collectives/elastic/first_failure.hpp"

#include <fmt/format.h>

#include <charconv>

#include "common/log.hpp"

namespace canopy::collectives {
namespace {

constexpr const char* kFailureKey = "failure/first";

// What separates the first failure from this rank's own error in a message (tests look for it).
constexpr const char* kOwnErrorLead = "\nthen, on this rank: ";
// What follows an error that could not be shared because the store failed as well.
constexpr const char* kStoreFailedLead = "\n(the store could not be reached to share it: ";

}  // namespace

// "<code> <reporter>\n<message>": small, and readable with a store's command-line client.
std::string FailureRecord::encode() const {
  return fmt::format("{} {}\n{}", static_cast<int>(code), reporter, message);
}

FailureRecord FailureRecord::decode(const std::string& bytes) {
  FailureRecord record;
  std::size_t newline = bytes.find('\n');
  std::size_t space = bytes.find(' ');
  int code = -1;
  int reporter = -1;
  bool parsed =
      newline != std::string::npos && space < newline &&
      std::from_chars(bytes.data(), bytes.data() + space, code).ec == std::errc() &&
      std::from_chars(bytes.data() + space + 1, bytes.data() + newline, reporter).ec == std::errc() &&
      code >= 0 && code <= static_cast<int>(ErrorCode::Revoked);
  if (!parsed) {  // not written by this code: report it as it is
    record.message = bytes;
    return record;
  }
  record.code = static_cast<ErrorCode>(code);
  record.reporter = reporter;
  record.message = bytes.substr(newline + 1);
  return record;
}

FirstFailure::FirstFailure(std::shared_ptr<Store> store, int rank) : store_(std::move(store)), rank_(rank) {}

std::string FirstFailure::explain(const FailureRecord& first) const {
  if (first.reporter == rank_) return first.message;
  return fmt::format("rank {}: the first failure in this communicator, as rank {} reported it: {}", rank_,
                     first.reporter, first.message);
}

Error FirstFailure::blame(const Error& error) {
  if (!store_) return error;
  std::optional<FailureRecord> first = known();
  if (!first) {
    try {
      const std::string mine = FailureRecord{error.code(), rank_, error.what()}.encode();
      const std::string stored = store_->compare_set(kFailureKey, "", mine);
      first = FailureRecord::decode(stored);
      learn(*first);
      if (stored == mine) return error;
    } catch (const std::exception& e) {
      // The store's failure may be the cause (a peer that lost it exited, and this rank saw only its
      // sockets close): say it beside what this rank saw, which no first failure can replace now.
      return Error(error.code(), fmt::format("{}{}{})", error.what(), kStoreFailedLead, e.what()));
    }
  }
  std::string message = explain(*first);
  // An Aborted error is the echo of the first failure (the monitor or the user aborted this rank
  // because of it): it adds nothing. Any other error is what this rank saw, worth keeping.
  if (error.code() != ErrorCode::Aborted && error.what() != first->message)
    message += kOwnErrorLead + std::string(error.what());
  return Error(first->code, message);
}

std::optional<FailureRecord> FirstFailure::read() {
  if (std::optional<FailureRecord> first = known()) return first;
  if (!store_ || !store_->check({kFailureKey})) return std::nullopt;
  FailureRecord first = FailureRecord::decode(store_->get(kFailureKey));
  learn(first);
  return first;
}

std::optional<FailureRecord> FirstFailure::known() const {
  std::lock_guard lock(mutex_);
  return known_;
}

void FirstFailure::learn(const FailureRecord& first) {
  std::lock_guard lock(mutex_);
  if (!known_) known_ = first;
}

}  // namespace canopy::collectives
