#include "launcher/output_budget.hpp"

#include <fmt/format.h>

#include <string_view>

#include "common/fd_limit.hpp"

namespace canopy::launcher {
namespace {

// Where /proc/self/fd cannot be read: the standard streams, the signalfd, the store's listener and its
// event loop's descriptors, and a few inherited ones.
constexpr int kAssumedOpen = 16;

std::string plural(std::uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string limit_words(const DescriptorBudget& b) {
  return fmt::format("the limit of {} (RLIMIT_NOFILE{})", limit_text(b.limit),
                     b.limit_is_hard ? "" : ", soft; canopy-run could not raise it to the hard limit");
}

std::string raise_hint(std::uint64_t count, std::string_view what = {}) {
  return fmt::format("raise the limit to at least {}{} (ulimit -n {})", count, what, count);
}

// "1024 pipes (2 per rank), 512 store connections (1 per rank), canopy-run's own 9 + 16 spare: 1561 ..."
std::string breakdown(const DescriptorBudget& b, bool pipes, bool store) {
  std::string text;
  if (pipes) text += fmt::format("{} (2 per rank), ", plural(b.pipes(), "pipe", "pipes"));
  if (store && b.store_connections() > 0) {
    text += fmt::format("{} ({} per rank{}), ",
                        plural(b.store_connections(), "store connection", "store connections"),
                        kStoreConnectionsPerRank, b.other_nodes > 0 ? ", 1 per other node" : "");
  }
  const std::uint64_t total = static_cast<std::uint64_t>(b.open_now) + kDescriptorHeadroom +
                              (pipes ? b.pipes() : 0) + (store ? b.store_connections() : 0);
  text +=
      fmt::format("canopy-run's own {} + {} spare: {} descriptors", b.open_now, kDescriptorHeadroom, total);
  return text;
}

}  // namespace

OutputChoice choose_output(OutputMode mode, const DescriptorBudget& b) {
  OutputChoice choice;
  const std::uint64_t with_pipes = b.needed(true);
  const std::uint64_t without_pipes = b.needed(false);
  const std::uint64_t pipes_alone = static_cast<std::uint64_t>(b.open_now) + kDescriptorHeadroom + b.pipes();
  const std::string ranks = plural(static_cast<std::uint64_t>(b.local_ranks), "rank", "ranks");

  switch (mode) {
    case OutputMode::Prefixed:
      choice.prefixed = true;
      if (!b.fits(pipes_alone)) {
        choice.refusal = fmt::format(
            "--output prefixed for {} needs {}, over {}; {}, or pass --output auto or direct", ranks,
            breakdown(b, true, false), limit_words(b),
            raise_hint(with_pipes, b.store_connections() > 0 ? ", the store's connections included" : ""));
        return choice;
      }
      break;
    case OutputMode::Direct:
      choice.prefixed = false;
      break;
    case OutputMode::Auto:
      choice.prefixed = b.fits(with_pipes);
      if (!choice.prefixed) {
        choice.notice = fmt::format(
            "{} write straight to canopy-run's stdout and stderr, without \"[rank] \" prefixes: prefixing "
            "them needs {}, over {}; to keep the prefixes, {}{}",
            ranks, breakdown(b, true, true), limit_words(b), raise_hint(with_pipes),
            b.fits(pipes_alone) && b.store_connections() > 0
                ? ", or pass --output prefixed if the program does not use the store"
                : "");
      }
      break;
  }

  const std::uint64_t needed = choice.prefixed ? with_pipes : without_pipes;
  if (b.store_connections() > 0 && !b.fits(needed)) {
    choice.warning = fmt::format(
        "warning: the store's connections may not fit: {}, over {}; a rank whose connection cannot be "
        "accepted waits for it; {}",
        breakdown(b, choice.prefixed, true), limit_words(b), raise_hint(needed));
  }
  choice.summary = fmt::format("canopy-run: output {} under a descriptor limit of {}: {}",
                               choice.prefixed ? "prefixed" : "direct", limit_text(b.limit),
                               breakdown(b, choice.prefixed, true));
  return choice;
}

DescriptorBudget current_descriptor_budget(int local_ranks, int store_clients, int other_nodes) {
  DescriptorBudget b;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    b.limit = limit.rlim_cur;
    b.limit_is_hard = limit.rlim_cur == limit.rlim_max || limit.rlim_max == RLIM_INFINITY;
  }
  const int open = open_descriptor_count();
  b.open_now = open >= 0 ? open : kAssumedOpen;
  b.local_ranks = local_ranks;
  b.store_clients = store_clients;
  b.other_nodes = other_nodes;
  return b;
}

}  // namespace canopy::launcher
