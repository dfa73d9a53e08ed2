// The parts of the verbs transport that need no device: they run on every machine.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "canopy/error.hpp"
#include "transport/select_transport.hpp"
#include "transport/verbs/credits.hpp"
#include "transport/verbs/gid_choice.hpp"
#include "transport/verbs/hca_spec.hpp"
#include "transport/verbs/registration_cache.hpp"
#include "transport/verbs/wire.hpp"

namespace canopy::transport::verbs {
namespace {

// ---- CANOPY_IB_HCA ----

TEST(HcaSpec, EmptySelectsEverything) {
  HcaSpec spec = HcaSpec::parse("");
  EXPECT_TRUE(spec.matches("mlx5_0", 1));
  EXPECT_TRUE(spec.matches("rxe0", 2));
}

TEST(HcaSpec, PrefixesPortsExactAndExclusion) {
  HcaSpec prefix = HcaSpec::parse("mlx5");
  EXPECT_TRUE(prefix.matches("mlx5_0", 1));
  EXPECT_TRUE(prefix.matches("mlx5_12", 2));
  EXPECT_FALSE(prefix.matches("rxe0", 1));

  HcaSpec port = HcaSpec::parse("mlx5_0:2,rxe");
  EXPECT_FALSE(port.matches("mlx5_0", 1));
  EXPECT_TRUE(port.matches("mlx5_0", 2));
  EXPECT_TRUE(port.matches("rxe0", 1));

  HcaSpec exact = HcaSpec::parse("=mlx5_1");
  EXPECT_TRUE(exact.matches("mlx5_1", 1));
  EXPECT_FALSE(exact.matches("mlx5_10", 1));

  HcaSpec excluded = HcaSpec::parse("^mlx5_1:1");
  EXPECT_TRUE(excluded.matches("mlx5_0", 1));
  EXPECT_FALSE(excluded.matches("mlx5_1", 1));
  EXPECT_TRUE(excluded.matches("mlx5_1", 2));

  HcaSpec excluded_exact = HcaSpec::parse("^=rxe0");
  EXPECT_FALSE(excluded_exact.matches("rxe0", 1));
  EXPECT_TRUE(excluded_exact.matches("rxe01", 1));
}

TEST(HcaSpec, MalformedEntriesNameTheVariable) {
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", ",mlx5", ":1", "mlx5_0:1x"}) {
    try {
      HcaSpec::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Config) << bad;
      EXPECT_NE(std::string(e.what()).find("CANOPY_IB_HCA"), std::string::npos) << e.what();
    }
  }
}

// ---- GID choice ----

GidEntry gid(int index, GidType type, std::vector<std::uint8_t> bytes) {
  GidEntry e;
  e.index = index;
  e.type = type;
  std::memcpy(e.gid.data(), bytes.data(), 16);
  return e;
}
const std::vector<std::uint8_t> kLinkLocal = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                                              0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
const std::vector<std::uint8_t> kIpv4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
const std::vector<std::uint8_t> kIpv6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
const std::vector<std::uint8_t> kZero(16, 0);

TEST(GidChoice, RoceV2Ipv4FirstWhereverItSits) {
  // The usual rxe / mlx5 table: link-local v1, v2, then the IPv4 address as v1, v2.
  std::vector<GidEntry> table = {gid(0, GidType::RoCEv1, kLinkLocal), gid(1, GidType::RoCEv2, kLinkLocal),
                                 gid(2, GidType::RoCEv1, kIpv4), gid(3, GidType::RoCEv2, kIpv4)};
  EXPECT_EQ(choose_gid(table, true), 3);
  std::swap(table[0], table[3]);
  EXPECT_EQ(choose_gid(table, true), 3);  // the index, not the position
}

TEST(GidChoice, FallsBackInOrder) {
  EXPECT_EQ(
      choose_gid(std::vector{gid(0, GidType::RoCEv2, kLinkLocal), gid(4, GidType::RoCEv2, kIpv6)}, true), 4);
  EXPECT_EQ(
      choose_gid(std::vector{gid(0, GidType::RoCEv1, kIpv4), gid(1, GidType::RoCEv2, kLinkLocal)}, true), 1);
  EXPECT_EQ(
      choose_gid(std::vector{gid(0, GidType::RoCEv1, kLinkLocal), gid(2, GidType::RoCEv1, kIpv4)}, true), 2);
  EXPECT_EQ(choose_gid(std::vector{gid(5, GidType::RoCEv2, kIpv4), gid(6, GidType::RoCEv2, kIpv4)}, true), 5);
}

TEST(GidChoice, NothingUsable) {
  EXPECT_EQ(choose_gid(std::vector<GidEntry>{}, true), std::nullopt);
  EXPECT_EQ(choose_gid(std::vector{gid(0, GidType::RoCEv2, kZero)}, true), std::nullopt);
  EXPECT_EQ(choose_gid(std::vector{gid(0, GidType::InfiniBand, kLinkLocal)}, true), std::nullopt);
}

TEST(GidChoice, InfiniBandTakesThePortGid) {
  EXPECT_EQ(
      choose_gid(std::vector{gid(0, GidType::InfiniBand, kLinkLocal), gid(1, GidType::InfiniBand, kIpv6)},
                 false),
      0);
  EXPECT_EQ(describe(gid(3, GidType::RoCEv2, kIpv4)), "::ffff:192.0.2.1 (RoCE v2, index 3)");
  EXPECT_EQ(describe(gid(0, GidType::RoCEv1, kLinkLocal)),
            "fe80:0000:0000:0000:0211:22ff:fe33:4455 (RoCE v1, index 0)");
}

// ---- registration cache ----

struct FakeDevice {
  int registered = 0;
  int deregistered = 0;
  std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
  RegistrationCache make(bool keep, std::size_t capacity) {
    return RegistrationCache(
        [this](std::uintptr_t begin, std::size_t length, bool writable) {
          ranges.emplace_back(begin, length);
          ++registered;
          auto key = static_cast<std::uint32_t>(registered * 2 + (writable ? 1 : 0));
          return Registration{reinterpret_cast<void*>(begin), key, key + 1000};
        },
        [this](const Registration&) { ++deregistered; }, keep, capacity);
  }
};

TEST(RegistrationCache, SharesCoveringRegistrationsAndAlignsToPages) {
  FakeDevice device;
  auto cache = device.make(false, 8);
  alignas(4096) static std::byte buffer[4 * 4096];
  auto a = cache.acquire(buffer + 100, 5000, true);
  ASSERT_EQ(device.registered, 1);
  EXPECT_EQ(device.ranges[0].first, reinterpret_cast<std::uintptr_t>(buffer));
  EXPECT_EQ(device.ranges[0].second, 2 * 4096u);
  auto b = cache.acquire(buffer + 4096, 4096, true);  // inside the first registration's pages
  auto c = cache.acquire(buffer + 8000, 100, false);  // a send may use a writable registration
  EXPECT_EQ(device.registered, 1);
  EXPECT_EQ(b.lkey, a.lkey);
  EXPECT_EQ(c.rkey, a.rkey);
  auto d = cache.acquire(buffer + 8192, 4096, true);  // beyond it
  EXPECT_EQ(device.registered, 2);
  for (const auto& lease : {a, b, c, d}) cache.release(lease);
  EXPECT_EQ(device.deregistered, 2);  // nothing kept idle unless asked
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(RegistrationCache, ReadOnlyNeverServesAReceive) {
  FakeDevice device;
  auto cache = device.make(false, 8);
  alignas(4096) static std::byte buffer[4096];
  auto send = cache.acquire(buffer, 4096, false);
  auto recv = cache.acquire(buffer, 4096, true);
  EXPECT_EQ(device.registered, 2);
  EXPECT_NE(send.entry, recv.entry);
  cache.release(send);
  cache.release(recv);
}

TEST(RegistrationCache, KeepsIdleUpToCapacityLeastRecentlyUsedFirst) {
  FakeDevice device;
  auto cache = device.make(true, 2);
  alignas(4096) static std::byte buffer[8 * 4096];
  auto use = [&](int page) { cache.release(cache.acquire(buffer + page * 4096, 4096, true)); };
  use(0);
  use(2);
  use(0);  // hit: page 0 is now the most recent
  EXPECT_EQ(device.registered, 2);
  use(4);  // a third idle one: page 2 goes
  EXPECT_EQ(device.deregistered, 1);
  use(0);
  EXPECT_EQ(device.registered, 3);
  use(2);
  EXPECT_EQ(device.registered, 4);
  EXPECT_EQ(cache.entries(), 2u);
  cache.clear();
  EXPECT_EQ(device.deregistered, device.registered);
}

TEST(RegistrationCache, LeasedEntriesAreNeverEvicted) {
  FakeDevice device;
  auto cache = device.make(true, 0);
  alignas(4096) static std::byte buffer[4 * 4096];
  auto held = cache.acquire(buffer, 4096, true);
  cache.release(cache.acquire(buffer + 8192, 4096, true));
  EXPECT_EQ(device.deregistered, 1);
  EXPECT_EQ(cache.entries(), 1u);
  cache.release(held);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_THROW(cache.release(held), Error);
}

// ---- credits ----

TEST(Credits, ReserveIsOnlyForUpdates) {
  CreditAccount credits(4);
  EXPECT_TRUE(credits.can_send_message());
  credits.spend();
  credits.spend();
  credits.spend();
  EXPECT_FALSE(credits.can_send_message());  // the last one is held back
  EXPECT_TRUE(credits.can_send_update());
  credits.spend();
  EXPECT_FALSE(credits.can_send_update());
  EXPECT_THROW(credits.spend(), Error);
  credits.grant(3);
  EXPECT_EQ(credits.available(), 3);
  EXPECT_THROW(credits.grant(2), Error);  // more than was ever spent: a confused peer
}

TEST(Credits, UpdatesFallDueAtHalfTheSlots) {
  CreditAccount credits(64);
  for (int i = 0; i < 31; ++i) credits.reposted();
  EXPECT_FALSE(credits.update_due());
  credits.reposted();
  EXPECT_TRUE(credits.update_due());
  EXPECT_EQ(credits.take_owed(), 32);
  EXPECT_FALSE(credits.update_due());
  EXPECT_EQ(credits.owed(), 0);
  EXPECT_THROW(CreditAccount(1), Error);
}

// Two accounts driven like two busy peers that only ever send when credits allow and return credits
// by the transport's rules: neither may stall while the other holds credits it owes.
TEST(Credits, TwoPeersNeverDeadlock) {
  constexpr int kSlots = 8;
  CreditAccount a(kSlots), b(kSlots);
  int a_to_b = 0, b_to_a = 0, a_returns = 0, b_returns = 0;  // in flight
  int a_idle_rounds = 0, b_idle_rounds = 0, a_data = 0, b_data = 0;
  for (int round = 0; round < 1000; ++round) {
    // Both always have data to send, and send as much as credits allow, carrying what they owe.
    int a_sent = 0, b_sent = 0;
    for (; a.can_send_message(); ++a_sent, ++a_to_b) {
      a.spend();
      a_returns += a.take_owed();
    }
    for (; b.can_send_message(); ++b_sent, ++b_to_a) {
      b.spend();
      b_returns += b.take_owed();
    }
    // Credit-only updates where due, from the reserve.
    if (a.update_due() && a.can_send_update()) {
      a.spend();
      a_returns += a.take_owed();
      ++a_to_b;
    }
    if (b.update_due() && b.can_send_update()) {
      b.spend();
      b_returns += b.take_owed();
      ++b_to_a;
    }
    a_data += a_sent;
    b_data += b_sent;
    a_idle_rounds = a_sent == 0 ? a_idle_rounds + 1 : 0;
    b_idle_rounds = b_sent == 0 ? b_idle_rounds + 1 : 0;
    ASSERT_LE(a_idle_rounds, 1) << "round " << round;
    ASSERT_LE(b_idle_rounds, 1) << "round " << round;
    // Everything in flight lands; the receivers repost.
    for (; a_to_b > 0; --a_to_b) b.reposted();
    for (; b_to_a > 0; --b_to_a) a.reposted();
    b.grant(a_returns);
    a.grant(b_returns);
    a_returns = b_returns = 0;
  }
  EXPECT_GE(a_data, 1000);
  EXPECT_GE(b_data, 1000);
}

// ---- wire formats ----

TEST(Wire, AddressRoundTripsAndRefusesOtherVersions) {
  QpAddress a;
  a.lid = 0x1234;
  a.qp_number = 0xabcdef;
  a.packet_sequence = 0x123456;
  a.port = 2;
  a.mtu = 3;
  a.ethernet = true;
  a.gid_index = 3;
  a.gid[15] = 9;
  a.receive_slots = 64;
  std::string bytes = encode_address(a);
  EXPECT_EQ(decode_address(bytes, "rank 1"), a);
  std::string other = bytes;
  other[0] = 2;
  try {
    decode_address(other, "rank 1");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Protocol);
    EXPECT_NE(std::string(e.what()).find("rank 1 published a verbs queue-pair address of version 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(decode_address(bytes.substr(0, 10), "rank 1"), Error);
  EXPECT_THROW(decode_address("x", "rank 1"), Error);
}

TEST(Wire, ControlMessagesRoundTripAndAreChecked) {
  ControlMessage m;
  m.type = ControlType::ClearToSend;
  m.credits = 31;
  m.seq = 77;
  m.address = 0x7fff12345678;
  m.rkey = 0xdeadbeef;
  m.frame.envelope.comm_id = 5;
  m.frame.envelope.seq = 9;
  m.frame.envelope.count = 1000;
  m.frame.payload_bytes = 4000;
  std::array<std::byte, kControlMessageSize> bytes{};
  encode_control(m, bytes);
  EXPECT_EQ(decode_control(bytes), m);

  ControlMessage credit;
  credit.credits = 3;
  encode_control(credit, bytes);
  EXPECT_EQ(decode_control(bytes), credit);

  for (ControlType type : {ControlType::ReadyToSend, ControlType::ReadDone, ControlType::Mismatch}) {
    ControlMessage other = m;
    other.type = type;
    if (!carries_frame(type)) other.frame = FrameHeader{};
    encode_control(other, bytes);
    EXPECT_EQ(decode_control(bytes), other);
  }

  auto broken = bytes;
  broken[1] = std::byte{9};
  EXPECT_THROW(decode_control(broken), Error);
  encode_control(m, bytes);
  bytes[24] = std::byte{0};  // the frame's magic
  EXPECT_THROW(decode_control(bytes), Error);
  EXPECT_THROW(decode_control(std::span<const std::byte>(bytes).first(10)), Error);
}

// ---- settings ----

TEST(Settings, VerbsOptionsFromEnvironment) {
  VerbsOptions options = VerbsOptions::from_environment(EnvMap{{"CANOPY_IB_HCA", "=rxe0:1"},
                                                               {"CANOPY_IB_GID_INDEX", "3"},
                                                               {"CANOPY_IB_SPIN_US", "0"},
                                                               {"CANOPY_IB_CHUNK_BYTES", "65536"},
                                                               {"CANOPY_IB_REG_CACHE", "1"}});
  EXPECT_EQ(options.hca, "=rxe0:1");
  EXPECT_EQ(options.gid_index, 3);
  EXPECT_EQ(options.spin, std::chrono::microseconds(0));
  EXPECT_EQ(options.max_chunk_bytes, 65536u);
  EXPECT_TRUE(options.keep_registrations);
  VerbsOptions defaults = VerbsOptions::from_environment(EnvMap{});
  EXPECT_EQ(defaults.gid_index, -1);
  EXPECT_FALSE(defaults.keep_registrations);
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{{"CANOPY_IB_GID_INDEX", "256"},
                                                                             {"CANOPY_IB_CHUNK_BYTES", "100"},
                                                                             {"CANOPY_IB_REG_CACHE", "yes"},
                                                                             {"CANOPY_IB_SPIN_US", "-1"}}) {
    try {
      VerbsOptions::from_environment(EnvMap{{name, value}});
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Config);
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TransportKind transport_kind_from(const EnvMap& env) {
  return TransportSettings::from(Settings::parse(env)).kind;
}

TEST(Settings, TransportKind) {
  EXPECT_EQ(transport_kind_from(EnvMap{}), TransportKind::Auto);
  EXPECT_EQ(transport_kind_from(EnvMap{{"CANOPY_TRANSPORT", "tcp"}}), TransportKind::Tcp);
  EXPECT_EQ(transport_kind_from(EnvMap{{"CANOPY_TRANSPORT", "shm+tcp"}}), TransportKind::ShmTcp);
  EXPECT_EQ(transport_kind_from(EnvMap{{"CANOPY_TRANSPORT", "verbs"}}), TransportKind::Verbs);
  EXPECT_EQ(transport_kind_from(EnvMap{{"CANOPY_TRANSPORT", "auto"}}), TransportKind::Auto);
  try {
    transport_kind_from(EnvMap{{"CANOPY_TRANSPORT", "ib"}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("CANOPY_TRANSPORT='ib'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace canopy::transport::verbs
