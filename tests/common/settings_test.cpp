// The settings registry: each grammar, every default, every error naming the variable, the value and the
// accepted forms, and docs/SETTINGS.md listing every setting.
#include "common/settings.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "canopy/error.hpp"
#include "tests/support/config_error.hpp"

namespace canopy::settings {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

std::string config_error(const EnvMap& env) {
  return testing::config_error_of([&] { Settings::parse(env); });
}

TEST(Settings, DefaultsWhereNothingIsSet) {
  const Settings s = Settings::parse({});
  EXPECT_EQ(s.duration("CANOPY_TIMEOUT"), std::chrono::seconds(300));
  EXPECT_EQ(s.choice("CANOPY_DEBUG"), "WARN");
  EXPECT_EQ(s.size("CANOPY_CHUNK_BYTES"), 1u << 20);
  EXPECT_TRUE(s.flag("CANOPY_CALIBRATE"));
  EXPECT_EQ(s.choice("CANOPY_TRANSPORT"), "auto");
  EXPECT_FALSE(s.has("CANOPY_IB_SPIN_US"));  // the spin rule decides
  EXPECT_FALSE(s.has("CANOPY_SOCKET_SPIN_US"));
  EXPECT_FALSE(s.has("CANOPY_IB_GID_INDEX"));
  EXPECT_FALSE(s.has("CANOPY_JOB_TOKEN"));
  EXPECT_EQ(s.text("CANOPY_JOB_TOKEN"), "");
}

TEST(Settings, EmptyValuesCountAsUnset) {
  const Settings s = Settings::parse({{"CANOPY_TIMEOUT", ""}, {"CANOPY_SOCKET_SPIN_US", ""}});
  EXPECT_EQ(s.duration("CANOPY_TIMEOUT"), std::chrono::seconds(300));
  EXPECT_FALSE(s.has("CANOPY_SOCKET_SPIN_US"));
}

TEST(Settings, EveryDefaultReadsInItsOwnGrammarAndRange) {
  for (const Spec& spec : kRegistry) {
    EXPECT_TRUE(spec.name.starts_with("CANOPY_")) << spec.name;
    EXPECT_FALSE(spec.meaning.empty()) << spec.name;
    EXPECT_EQ(find_spec(spec.name), &spec) << spec.name << " is in the registry twice";
  }
  EXPECT_NO_THROW(Settings::parse({}));
  EXPECT_EQ(find_spec("CANOPY_NO_SUCH_SETTING"), nullptr);
}

TEST(Settings, Flags) {
  for (const char* yes : {"1", "true", "TRUE", "True"}) EXPECT_TRUE(parse_flag("F", yes)) << yes;
  for (const char* no : {"0", "false", "False"}) EXPECT_FALSE(parse_flag("F", no)) << no;
  // "yes" and "on" are refused: one spelling per meaning, and CANOPY_CALIBRATE=off must not mean on.
  for (const char* bad : {"yes", "on", "2", "", " 1"}) EXPECT_THROW(parse_flag("F", bad), Error) << bad;
  EXPECT_FALSE(Settings::parse({{"CANOPY_CALIBRATE", "0"}}).flag("CANOPY_CALIBRATE"));
  const std::string message = config_error({{"CANOPY_CALIBRATE", "off"}});
  EXPECT_MENTIONS(message, "CANOPY_CALIBRATE='off'");
  EXPECT_MENTIONS(message, "1 or true, 0 or false");
}

TEST(Settings, Sizes) {
  EXPECT_EQ(parse_size("S", "0"), 0u);
  EXPECT_EQ(parse_size("S", "8"), 8u);
  EXPECT_EQ(parse_size("S", "8B"), 8u);
  EXPECT_EQ(parse_size("S", "64K"), 64u << 10);
  EXPECT_EQ(parse_size("S", "64k"), 64u << 10);
  EXPECT_EQ(parse_size("S", "64KiB"), 64u << 10);
  EXPECT_EQ(parse_size("S", "16M"), 16u << 20);
  EXPECT_EQ(parse_size("S", "16MiB"), 16u << 20);
  EXPECT_EQ(parse_size("S", "2G"), 2ull << 30);
  EXPECT_EQ(parse_size("S", "2GiB"), 2ull << 30);
  for (const char* bad : {"", "M", "1.5M", "-1", "1T", "1 M", "1KB", "99999999999G", "18446744073709551616"})
    EXPECT_THROW(parse_size("S", bad), Error) << bad;
  EXPECT_EQ(Settings::parse({{"CANOPY_CHUNK_BYTES", "256K"}}).size("CANOPY_CHUNK_BYTES"), 256u << 10);
  const std::string message = config_error({{"CANOPY_CHUNK_BYTES", "1X"}});
  EXPECT_MENTIONS(message, "CANOPY_CHUNK_BYTES='1X' is not a size");
  EXPECT_MENTIONS(message, "K, M or G");
  EXPECT_MENTIONS(config_error({{"CANOPY_CHUNK_BYTES", "0"}}), "CANOPY_CHUNK_BYTES='0' is out of range");
}

TEST(Settings, Durations) {
  EXPECT_EQ(parse_duration("D", "2"), std::chrono::seconds(2));
  EXPECT_EQ(parse_duration("D", "0.5"), milliseconds(500));
  EXPECT_EQ(parse_duration("D", "1e-3"), milliseconds(1));
  EXPECT_EQ(parse_duration("D", "250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("D", "20us"), microseconds(20));
  EXPECT_EQ(parse_duration("D", "3s"), std::chrono::seconds(3));
  EXPECT_EQ(parse_duration("D", "75", 1e-6), microseconds(75));  // a setting counted in microseconds
  EXPECT_EQ(parse_duration("D", "1ms", 1e-6), microseconds(1000));
  for (const char* bad : {"", "fast", "-1", "1min", "nan", "inf", "1e300", "0.5 s"})
    EXPECT_THROW(parse_duration("D", bad), Error) << bad;
  const Settings s = Settings::parse({{"CANOPY_TIMEOUT", "2.5"}, {"CANOPY_SOCKET_SPIN_US", "0"}});
  EXPECT_EQ(s.duration("CANOPY_TIMEOUT"), milliseconds(2500));
  EXPECT_TRUE(s.has("CANOPY_SOCKET_SPIN_US"));  // 0 is a value: never spin
  EXPECT_EQ(s.duration("CANOPY_SOCKET_SPIN_US"), microseconds(0));
  const std::string message = config_error({{"CANOPY_TIMEOUT", "soon"}});
  EXPECT_MENTIONS(message, "CANOPY_TIMEOUT='soon' is not a duration");
  EXPECT_MENTIONS(message, "number of seconds");
  EXPECT_MENTIONS(config_error({{"CANOPY_TIMEOUT", "0"}}), "CANOPY_TIMEOUT='0' is out of range");
  const std::string spin = config_error({{"CANOPY_SOCKET_SPIN_US", "2000000"}});
  EXPECT_MENTIONS(spin, "out of range");
  EXPECT_MENTIONS(spin, "0 (never spin)");
}

TEST(Settings, IntegersAndTheirRange) {
  EXPECT_EQ(parse_integer("I", "-3"), -3);
  for (const char* bad : {"", "3x", "0x10", "1.0"}) EXPECT_THROW(parse_integer("I", bad), Error) << bad;
  EXPECT_EQ(Settings::parse({{"CANOPY_IB_GID_INDEX", "3"}}).integer("CANOPY_IB_GID_INDEX"), 3);
  const std::string message = config_error({{"CANOPY_IB_GID_INDEX", "256"}});
  EXPECT_MENTIONS(message, "CANOPY_IB_GID_INDEX='256' is out of range");
  EXPECT_MENTIONS(message, "from 0 to 255");
  // Zero may mean something of its own beside the range.
  EXPECT_EQ(Settings::parse({{"CANOPY_IB_CHUNK_BYTES", "0"}}).size("CANOPY_IB_CHUNK_BYTES"), 0u);
  EXPECT_MENTIONS(config_error({{"CANOPY_IB_CHUNK_BYTES", "100"}}),
                  "0 (the port's largest message) or a value from 4K to 2G");
}

TEST(Settings, ChoicesInAnyCase) {
  EXPECT_EQ(parse_choice("C", "TCP", "auto|tcp|verbs"), "tcp");
  EXPECT_EQ(Settings::parse({{"CANOPY_DEBUG", "info"}}).choice("CANOPY_DEBUG"), "INFO");
  const std::string message = config_error({{"CANOPY_DEBUG", "verbose"}});
  EXPECT_MENTIONS(message, "CANOPY_DEBUG='verbose' is not one of: TRACE, DEBUG, INFO, WARN, ERROR, OFF");
}

TEST(Settings, TextIsTakenAsItIs) {
  EXPECT_EQ(Settings::parse({{"CANOPY_SOCKET_IFNAME", "^docker,lo"}}).text("CANOPY_SOCKET_IFNAME"),
            "^docker,lo");
}

TEST(Settings, OnlyRegistrySettingsAreRead) {
  EXPECT_NO_THROW(Settings::parse({{"CANOPY_NOT_A_SETTING", "???"}, {"RANK", "x"}}));
}

TEST(Settings, FlagNamesInMessagesAreTheCallers) {
  try {
    parse_size("--minbytes", "8X");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_MENTIONS(std::string(e.what()), "--minbytes='8X' is not a size");
  }
}

// docs/SETTINGS.md has a row for every setting, with its default: a setting added to the registry
// without its row fails here.
TEST(Settings, EverySettingIsDocumented) {
  std::ifstream file(CANOPY_SOURCE_DIR "/docs/SETTINGS.md");
  ASSERT_TRUE(file) << "cannot read docs/SETTINGS.md";
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  for (const Spec& spec : kRegistry) {
    const std::string row_start = "| `" + std::string(spec.name) + "` |";
    const auto at = doc.find(row_start);
    ASSERT_NE(at, std::string::npos) << "docs/SETTINGS.md has no row starting " << row_start;
    const std::string row = doc.substr(at, doc.find('\n', at) - at);
    if (spec.fallback.empty()) continue;
    EXPECT_NE(row.find("`" + std::string(spec.fallback) + "`"), std::string::npos)
        << "the row of " << spec.name << " does not give its default `" << spec.fallback << "`: " << row;
  }
}

}  // namespace
}  // namespace canopy::settings
