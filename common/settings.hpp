// The settings of one communicator, parsed once from the environment by the registry
// (common/settings_registry.hpp) and passed down: each layer reads its own.
//
//   const Settings settings = Settings::parse(current_environment());
//   Duration timeout = settings.duration("CANOPY_TIMEOUT");   // a misspelt name does not compile
//
// One grammar per kind, shared with canopy-run's and canopy-bench's flags. A bad value is Error(Config)
// naming the variable (or flag), the value and the forms it accepts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.hpp"
#include "common/settings_registry.hpp"

namespace canopy::settings {

// --- The grammars; `name` is what the messages call the value (a variable or a flag) ---

// 1 or true, 0 or false (any case).
bool parse_flag(std::string_view name, std::string_view text);
long long parse_integer(std::string_view name, std::string_view text);
// A whole number of bytes with an optional B, K, M, G, KiB, MiB or GiB (powers of 1024; k, m, g too).
std::uint64_t parse_size(std::string_view name, std::string_view text);
// The shortest way parse_size reads `bytes` back: 8, 64K, 16M, 1G.
std::string format_size(std::uint64_t bytes);
// A decimal number, counted in `unit_seconds` (1: seconds, 1e-6: microseconds) unless it ends in us, ms or s.
std::chrono::microseconds parse_duration(std::string_view name, std::string_view text,
                                         double unit_seconds = 1);
// The word of `choices` ('|'-separated) that `text` is, in any case.
std::string_view parse_choice(std::string_view name, std::string_view text, std::string_view choices);

// The registry line of `name`, or nullptr.
const Spec* find_spec(std::string_view name);

consteval std::size_t registry_index(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kRegistry); ++i)
    if (kRegistry[i].name == name) return i;
  throw "no such setting in common/settings_registry.hpp";
}

// A setting's name, checked against the registry while compiling: it must be there, of kind K.
template <Kind K>
struct Key {
  consteval Key(const char* name) : index(registry_index(name)) {  // NOLINT: implicit, from the literal
    if (kRegistry[index].kind != K) throw "a setting of another kind";
  }
  std::size_t index;
};

// A setting's name, of any kind.
struct AnyKey {
  consteval AnyKey(const char* name) : index(registry_index(name)) {}  // NOLINT: implicit, from the literal
  std::size_t index;
};

class Settings {
 public:
  // Every registry setting from `env`; the default where it is unset or empty. Throws Error(Config) for
  // the first bad value.
  static Settings parse(const EnvMap& env);
  static Settings from_environment() { return parse(current_environment()); }

  bool flag(Key<Kind::Flag> key) const { return values_[key.index].flag; }
  long long integer(Key<Kind::Integer> key) const { return values_[key.index].integer; }
  std::uint64_t size(Key<Kind::Size> key) const { return values_[key.index].size; }
  std::chrono::microseconds duration(Key<Kind::Duration> key) const { return values_[key.index].duration; }
  const std::string& choice(Key<Kind::Choice> key) const { return values_[key.index].text; }
  const std::string& text(Key<Kind::Text> key) const { return values_[key.index].text; }
  // Whether the setting has a value (given, or by default); one without holds zero or "".
  bool has(AnyKey key) const { return values_[key.index].present; }

 private:
  struct Value {
    bool present = false;
    bool flag = false;
    long long integer = 0;
    std::uint64_t size = 0;
    std::chrono::microseconds duration{0};
    std::string text;
  };
  static Value read(const Spec& spec, std::string_view text);
  std::vector<Value> values_;
};

}  // namespace canopy::settings

namespace canopy {
using settings::Settings;
}  // namespace canopy
