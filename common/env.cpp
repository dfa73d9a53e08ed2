#include "common/env.hpp"

#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/settings.hpp"

extern char** environ;

namespace canopy {

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*entry, static_cast<std::size_t>(eq - *entry)), std::string(eq + 1));
  }
  return env;
}

std::optional<std::string> env_value(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<std::string> env_value(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<long long> env_integer(const EnvMap& env, const std::string& name) {
  auto text = env_value(env, name);
  if (!text) return std::nullopt;
  return settings::parse_integer(name, *text);
}

std::chrono::milliseconds default_timeout() {
  EnvMap only;  // not the whole environment: a bad setting elsewhere is its reader's to report
  if (auto text = env_value("CANOPY_TIMEOUT")) only.emplace("CANOPY_TIMEOUT", *text);
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      settings::Settings::parse(only).duration("CANOPY_TIMEOUT"));
}

}  // namespace canopy
