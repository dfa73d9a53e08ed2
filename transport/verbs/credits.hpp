// Flow control for one direction of one queue pair: every SEND and every RDMA write with immediate
// consumes a receive work request the peer posted, and one that finds none is an RNR error or a
// stall. So a sender spends one credit per such message and the receiver gives credits back (counted
// in its next control message, or in a credit update of its own) as it reposts the receives.
//
// One credit is held back for credit updates: if both sides spent everything on data they could
// never tell each other that receives were reposted. With that reserve there is no deadlock: a
// sender down to its reserve means the receiver holds (or will, once in-flight messages land) at
// least slots - 1 unreturned credits, which is past the update threshold.
#pragma once

#include "common/error.hpp"

namespace canopy::transport::verbs {

class CreditAccount {
 public:
  // `slots`: how many receives the peer keeps posted for us (and we for it).
  explicit CreditAccount(int slots)
      : slots_(slots), available_(slots), threshold_(slots / 2 > 0 ? slots / 2 : 1) {
    if (slots < 2)
      fail(ErrorCode::InvalidArgument, "credit account: {} receive slots; at least 2 needed", slots);
  }

  bool can_send_message() const { return available_ >= 2; }
  bool can_send_update() const { return available_ >= 1; }
  void spend() {
    if (available_ <= 0) fail(ErrorCode::Protocol, "credit account: a message sent without a credit");
    --available_;
  }
  // The peer reports `count` receives reposted. More than it could owe us is a protocol error.
  void grant(int count) {
    if (count < 0 || available_ + count > slots_)
      fail(ErrorCode::Protocol, "credit account: the peer returned {} credits while {} of {} were out", count,
           slots_ - available_, slots_);
    available_ += count;
  }

  // We reposted a receive that a message of the peer consumed: a credit we owe it.
  void reposted() { ++owed_; }
  bool update_due() const { return owed_ >= threshold_; }
  // Hands over everything owed, for the next outgoing control message.
  int take_owed() {
    int owed = owed_;
    owed_ = 0;
    return owed;
  }

  int available() const { return available_; }
  int owed() const { return owed_; }

 private:
  int slots_;
  int available_;
  int threshold_;
  int owed_ = 0;
};

}  // namespace canopy::transport::verbs
