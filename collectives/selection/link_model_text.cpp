#include "collectives/selection/link_model_text.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "common/error.hpp"

namespace canopy::collectives {
namespace {

// "a,b,g[,be,eb]" (with gamma) or "a,b[,be,eb]" (without); false for anything else.
bool parse_group(const std::string& text, bool with_gamma, LinkCost& link, double& gamma) {
  unsigned long long eager_bytes = 0;
  int fields = 0, used = 0;
  if (with_gamma) {
    fields = std::sscanf(text.c_str(), "%lf,%lf,%lf%n,%lf,%llu%n", &link.alpha, &link.beta, &gamma, &used,
                         &link.beta_eager, &eager_bytes, &used);
    fields -= 1;  // count the fields of one class of links
  } else {
    fields = std::sscanf(text.c_str(), "%lf,%lf%n,%lf,%llu%n", &link.alpha, &link.beta, &used,
                         &link.beta_eager, &eager_bytes, &used);
  }
  if (fields == 2) {
    link.beta_eager = link.beta;
    eager_bytes = 0;
  }
  link.eager_bytes = eager_bytes;
  return (fields == 2 || fields == 4) && static_cast<std::size_t>(used) == text.size() && link.alpha >= 0 &&
         link.beta > 0 && link.beta_eager > 0 && gamma >= 0;
}

std::string describe(const LinkCost& link) {
  std::string text = fmt::format("alpha {:.1f} us, beta {:.3g} GB/s", link.alpha * 1e6, 1e-9 / link.beta);
  if (link.eager_bytes > 0)
    text += fmt::format(" ({:.3g} GB/s up to {} KiB)", 1e-9 / link.beta_eager, link.eager_bytes >> 10);
  if (link.alpha_share_on_core < 1)
    text += fmt::format(" ({:.0f}% of alpha on a shared core)", 100 * link.alpha_share_on_core);
  return text;
}

bool same(const LinkCost& a, const LinkCost& b) {
  return a.alpha == b.alpha && a.beta == b.beta && a.beta_eager == b.beta_eager &&
         a.eager_bytes == b.eager_bytes && a.alpha_share_on_core == b.alpha_share_on_core;
}

}  // namespace

LinkModel parse_cost_model(std::string_view given) {
  const std::string text(given);  // sscanf needs the terminating zero
  LinkModel model;
  const std::size_t semicolon = text.find(';');
  LinkCost every;
  bool valid = parse_group(text.substr(0, semicolon), /*with_gamma=*/true, every, model.gamma);
  model.set_every_link(every);
  if (valid && semicolon != std::string::npos) {
    double unused = 0;
    valid = parse_group(text.substr(semicolon + 1), /*with_gamma=*/false, model.between_hosts, unused);
  }
  if (!valid)
    fail(
        ErrorCode::Config,
        "CANOPY_COST_MODEL='{}' is not a cost model: use 'alpha,beta,gamma' or "
        "'alpha,beta,gamma,beta_eager,eager_bytes' (seconds, seconds per byte, seconds per byte, seconds per "
        "byte, bytes; alpha and gamma at least 0, beta and beta_eager above 0), such as 2e-5,1e-9,1e-10, "
        "optionally followed by ';alpha,beta' or ';alpha,beta,beta_eager,eager_bytes' for the links between "
        "hosts",
        text);
  return model;
}

std::string encode(const MeasuredLink& measured) {
  const LinkCost& link = measured.link;
  return fmt::format("{:a},{:a},{:a},{:a},{},{:a},{:a}", link.alpha, link.beta, measured.gamma,
                     link.beta_eager, link.eager_bytes, link.alpha_share_on_core, measured.gamma_in_cache);
}

MeasuredLink decode_measured_link(const std::string& text) {
  MeasuredLink measured;
  LinkCost& link = measured.link;
  unsigned long long eager_bytes = 0;
  if (std::sscanf(text.c_str(), "%la,%la,%la,%la,%llu,%la,%la", &link.alpha, &link.beta, &measured.gamma,
                  &link.beta_eager, &eager_bytes, &link.alpha_share_on_core, &measured.gamma_in_cache) != 7 ||
      !(link.alpha_share_on_core >= 0 && link.alpha_share_on_core <= 1))
    fail(ErrorCode::Protocol, "malformed cost model '{}' in the store", text);
  link.eager_bytes = eager_bytes;
  return measured;
}

std::string describe(const LinkModel& link, const HostLayout& hosts) {
  std::string text = same(link.within_host, link.between_hosts)
                         ? describe(link.within_host)
                         : fmt::format("within hosts {}; between hosts {}", describe(link.within_host),
                                       describe(link.between_hosts));
  text += fmt::format(", gamma {:.2f} GB/s", 1e-9 / link.gamma);
  if (link.gamma_in_cache > 0) text += fmt::format(" ({:.1f} GB/s in cache)", 1e-9 / link.gamma_in_cache);
  for (int host = 0; host < static_cast<int>(hosts.cores_of_host.size()); ++host) {
    if (hosts.shares_cores(host))
      text +=
          fmt::format("; host {}: {} ranks share {} cores", host, hosts.ranks_on(host), hosts.cores_of(host));
  }
  return text;
}

}  // namespace canopy::collectives
