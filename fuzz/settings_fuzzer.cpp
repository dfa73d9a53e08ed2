// The settings registry (common/settings.hpp Settings::parse) on arbitrary environments, and each grammar
// on arbitrary values. Input: lines "NAME=VALUE" (settings.dict lists the names of the registry).
// Properties: refusals are Error(Config) only, naming the variable and quoting the value; an accepted
// environment gives every number within its range (or 0 where zero means something) and every choice one
// of its words; the parse is deterministic.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/settings.hpp"
#include "fuzz/fuzz_check.hpp"

using canopy::Error;
using canopy::ErrorCode;
using canopy::fuzz::check;
namespace settings = canopy::settings;

namespace {

// Every grammar on one value: only Error(Config) may come out, and it names what it was given.
void each_grammar(std::string_view value) {
  auto refused = [](const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "a settings grammar");
    check(std::string_view(e.what()).starts_with("V='"), "a refusal that does not quote the value", e.what());
  };
  try {
    settings::parse_flag("V", value);
  } catch (const Error& e) {
    refused(e);
  }
  try {
    settings::parse_integer("V", value);
  } catch (const Error& e) {
    refused(e);
  }
  try {
    settings::parse_size("V", value);
  } catch (const Error& e) {
    refused(e);
  }
  try {
    const auto d = settings::parse_duration("V", value, 1e-6);
    check(d.count() >= 0, "a negative duration");
  } catch (const Error& e) {
    refused(e);
  }
  try {
    const auto word = settings::parse_choice("V", value, "auto|tcp|verbs");
    check(word == "auto" || word == "tcp" || word == "verbs", "a choice outside its words");
  } catch (const Error& e) {
    refused(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const canopy::EnvMap env = canopy::fuzz::environment_from(text);
  for (const auto& [name, value] : env) each_grammar(value);
  try {
    const settings::Settings parsed = settings::Settings::parse(env);
    const settings::Settings again = settings::Settings::parse(env);
    check(parsed.text("CANOPY_JOB_TOKEN") == again.text("CANOPY_JOB_TOKEN") &&
              parsed.duration("CANOPY_TIMEOUT") == again.duration("CANOPY_TIMEOUT") &&
              parsed.size("CANOPY_CHUNK_BYTES") == again.size("CANOPY_CHUNK_BYTES"),
          "the parse is not deterministic");
    check(parsed.duration("CANOPY_TIMEOUT").count() >= 1000, "a deadline under 1 ms");
    check(parsed.size("CANOPY_CHUNK_BYTES") >= 1, "a chunk of 0 bytes");
    const auto chunk = parsed.size("CANOPY_IB_CHUNK_BYTES");
    check(chunk == 0 || (chunk >= 4096 && chunk <= (2ull << 30)), "an RDMA chunk outside its range");
    const auto gid = parsed.integer("CANOPY_IB_GID_INDEX");
    check(gid >= 0 && gid <= 255, "a GID index outside 0..255");
    const std::string& transport = parsed.choice("CANOPY_TRANSPORT");
    check(transport == "auto" || transport == "tcp" || transport == "verbs", "an unknown transport");
  } catch (const Error& e) {
    canopy::fuzz::check_refusal(e, ErrorCode::Config, "Settings::parse");
    check(std::string_view(e.what()).starts_with("CANOPY_"), "a refusal that names no setting", e.what());
  }
  return 0;
}
