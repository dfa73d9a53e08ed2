#include "collectives/schedules/schedule_checks.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace canopy::collectives {
namespace {

const char* name_of(Buffer buffer) {
  switch (buffer) {
    case Buffer::Data:
      return "Data";
    case Buffer::Staging:
      return "Staging";
    case Buffer::Input:
      return "Input";
  }
  return "?";
}

class RankChecker {
 public:
  RankChecker(const Schedule& schedule, const CollectiveCall& call, const std::string& context)
      : schedule_(schedule), call_(call), context_(context) {}

  void check() {
    for (index_ = 0; index_ < schedule_.steps.size(); ++index_) check_step(schedule_.steps[index_]);
  }

 private:
  [[noreturn]] void fail_step(const std::string& what) const {
    fail(ErrorCode::Protocol, "{}: rank {} step {} ({}): {}", context_, call_.rank, index_,
         describe(schedule_.steps[index_]), what);
  }

  std::uint64_t limit_of(Buffer buffer) const {
    switch (buffer) {
      case Buffer::Data:
        return call_.data_count();
      case Buffer::Staging:
        return schedule_.staging_count;
      case Buffer::Input:
        return separate_input(call_) ? call_.input_count() : 0;
    }
    return 0;
  }

  void check_block(const Block& block, const char* role) const {
    if (block.buffer == Buffer::Input && !separate_input(call_) && block.count > 0)
      fail_step(fmt::format("its {} block reads Input in an in-place call", role));
    const std::uint64_t limit = limit_of(block.buffer);
    if (block.offset > limit || block.count > limit - block.offset)
      fail_step(fmt::format("its {} block {} lies outside the {} buffer of {} elements", role,
                            describe(block), name_of(block.buffer), limit));
  }

  // Input is the caller's: read-only. A RecvReduce's staging is only ever its landing place.
  void check_written(const Block& block, Buffer expected) const {
    if (block.buffer != expected)
      fail_step(fmt::format("it writes {}, not {}", describe(block), name_of(expected)));
  }
  void check_not_input(const Block& block) const {
    if (block.buffer == Buffer::Input)
      fail_step(fmt::format("it writes {}, not Data or Staging", describe(block)));
  }

  void check_step(const Step& step) const {
    for (std::uint32_t dep : step.deps)
      if (dep >= index_) fail_step(fmt::format("dependency {} is not an earlier step", dep));
    if (step.kind != StepKind::Copy && (step.peer < 0 || step.peer >= call_.size || step.peer == call_.rank))
      fail_step(fmt::format("peer {} is not another rank of 0..{}", step.peer, call_.size - 1));
    switch (step.kind) {
      case StepKind::Send:
        check_block(step.src, "source");
        break;
      case StepKind::Recv:
        check_not_input(step.dst);
        check_block(step.dst, "destination");
        break;
      case StepKind::RecvReduce:
        check_written(step.dst, Buffer::Data);
        check_written(step.staging, Buffer::Staging);
        check_block(step.dst, "destination");
        check_block(step.staging, "staging");
        check_block(step.src, "accumulator");
        if (step.staging.count != step.dst.count)
          fail_step("its staging and destination blocks differ in size");
        if (step.src.buffer != Buffer::Input &&
            (step.src.buffer != step.dst.buffer || step.src.offset != step.dst.offset ||
             step.src.count != step.dst.count))
          fail_step("its accumulator is neither its destination nor an Input block");
        if (step.src.count != step.dst.count) fail_step("its accumulator and destination differ in size");
        break;
      case StepKind::Copy:
        check_not_input(step.dst);
        check_block(step.src, "source");
        check_block(step.dst, "destination");
        if (step.src.count != step.dst.count) fail_step("its source and destination differ in size");
        break;
    }
  }

  const Schedule& schedule_;
  const CollectiveCall& call_;
  const std::string& context_;
  std::size_t index_ = 0;
};

}  // namespace

std::string describe(const Block& block) {
  return fmt::format("{}[{}..{})", name_of(block.buffer), block.offset, block.offset + block.count);
}

std::string describe(const Step& step) {
  switch (step.kind) {
    case StepKind::Send:
      return fmt::format("Send {} to rank {}, tag {:#x}", describe(step.src), step.peer, step.tag);
    case StepKind::Recv:
      return fmt::format("Recv {} from rank {}, tag {:#x}", describe(step.dst), step.peer, step.tag);
    case StepKind::RecvReduce:
      return fmt::format(
          "RecvReduce {} via {} from rank {}, tag {:#x}{}", describe(step.dst), describe(step.staging),
          step.peer, step.tag,
          step.src.buffer == Buffer::Input ? fmt::format(", onto {}", describe(step.src)) : "");
    case StepKind::Copy:
      return fmt::format("Copy {} to {}", describe(step.src), describe(step.dst));
  }
  return "?";
}

bool separate_input(const CollectiveCall& call) {
  return !call.in_place || !call.input_in_data();
}

void check_rank_schedule(const Schedule& schedule, const CollectiveCall& call, const std::string& context) {
  RankChecker(schedule, call, context).check();
}

}  // namespace canopy::collectives
