// Reading settings from the environment, through a map so that parsers can be tested without setenv.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace canopy {

using EnvMap = std::map<std::string, std::string>;

// A snapshot of this process's environment.
EnvMap current_environment();

// The value of `name`, or nullopt when unset or empty.
std::optional<std::string> env_value(const EnvMap& env, const std::string& name);
std::optional<std::string> env_value(const std::string& name);

// Parses an integer variable in the settings' integer grammar; Error(Config) naming it when it is not one.
std::optional<long long> env_integer(const EnvMap& env, const std::string& name);

// CANOPY_TIMEOUT (default 300 s) as the environment has it now: the deadline of a blocking call without
// its own, outside a communicator (which reads it once, with its other settings).
std::chrono::milliseconds default_timeout();

}  // namespace canopy
