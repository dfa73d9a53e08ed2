// Point-to-point between real processes over TCP: matched per (peer, tag) whatever the collectives do,
// eager and rendezvous sizes, async both ways at once, during a collective, and every failure named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "collectives/p2p/p2p_descriptor.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::require;

void run_group(int ranks, const std::function<void(Communicator&)>& body,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  testing::run_group(ranks, body, testing::group_options("p2p-test", timeout));
}

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}
template <typename T>
std::span<std::byte> bytes_of(std::vector<T>& v) {
  return std::as_writable_bytes(std::span(v));
}

std::vector<float> pattern(std::size_t n, float seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i % 1000);
  return v;
}

TEST(P2PDescriptor, RoundTripsEveryKindAndRefusesMalformedBytes) {
  using collectives::P2PDescriptor;
  using collectives::P2PKind;
  for (P2PKind kind : {P2PKind::Eager, P2PKind::RequestToSend, P2PKind::ClearToSend, P2PKind::Data}) {
    const P2PDescriptor d{kind, 0xFFFFFFFFu, ~std::uint64_t{0}, 1234567890123ull};
    EXPECT_EQ(collectives::decode_descriptor(collectives::encode(d), 3), d);
  }
  auto refused = [](collectives::P2PDescriptorBytes bytes) {
    try {
      (void)collectives::decode_descriptor(bytes, 3);
      return std::string("accepted");
    } catch (const Error& e) {
      return e.code() == ErrorCode::Protocol ? std::string(e.what()) : std::string("wrong code");
    }
  };
  auto bytes = collectives::encode({P2PKind::Eager, 1, 2, 3});
  bytes[0] = std::byte{9};
  EXPECT_NE(refused(bytes).find("unknown kind 9"), std::string::npos) << refused(bytes);
  bytes = collectives::encode({P2PKind::Eager, 1, 2, 3});
  bytes[31] = std::byte{1};
  EXPECT_NE(refused(bytes).find("from rank 3"), std::string::npos) << refused(bytes);
}

// The program a new user tried first: a send between two ranks, then a collective on all four.
TEST(PointToPoint, ASendBetweenTwoRanksLeavesTheNextCollectiveAlone) {
  run_group(4, [](Communicator& comm) {
    if (comm.rank() == 0) comm.send(bytes_of(pattern(1000, 1)), 1);
    if (comm.rank() == 1) {
      std::vector<float> got(1000);
      comm.recv(bytes_of(got), 0);
      require(got == pattern(1000, 1), "rank 1 received the wrong floats");
    }
    std::vector<float> ones(100, 1.0f);
    comm.all_reduce(std::span(ones));
    require(ones == std::vector<float>(100, 4.0f), "all_reduce after the send: {}", ones[0]);
  });
}

// Each tag keeps its own order: the receiver takes tag 2 before tag 1, the sender sent them the other way,
// small (eager) and large (rendezvous) alike.
TEST(PointToPoint, TagsAreMatchedIndependently) {
  run_group(2, [](Communicator& comm) {
    for (std::size_t n : {std::size_t{10}, std::size_t{300'000}}) {
      if (comm.rank() == 0) {
        const auto one = pattern(n, 1), two = pattern(n, 2), three = pattern(n, 3);  // alive until sent
        Work a = comm.send_async(bytes_of(one), 1, 1);
        Work b = comm.send_async(bytes_of(two), 1, 2);
        Work c = comm.send_async(bytes_of(three), 1, 1);
        a.wait();
        b.wait();
        c.wait();
      } else {
        std::vector<float> two(n), first_one(n), second_one(n);
        comm.recv(bytes_of(two), 0, 2);
        comm.recv(bytes_of(first_one), 0, 1);
        comm.recv(bytes_of(second_one), 0, 1);
        require(two == pattern(n, 2) && first_one == pattern(n, 1) && second_one == pattern(n, 3),
                "tags out of order for {} floats", n);
      }
    }
    comm.barrier();
  });
}

// Receives posted long before the messages, and messages long before their receives (unexpected ones,
// kept until asked for), thousands of them, all in order.
TEST(PointToPoint, ThousandsOfSmallMessagesArriveInOrderAmongFourRanks) {
  run_group(4, [](Communicator& comm) {
    constexpr int kMessages = 2000;
    const int next = (comm.rank() + 1) % comm.size();
    const int prev = (comm.rank() + comm.size() - 1) % comm.size();
    std::vector<std::uint64_t> sent(kMessages), received(kMessages, 0);
    for (int i = 0; i < kMessages; ++i) sent[i] = static_cast<std::uint64_t>(comm.rank()) * 1'000'000 + i;
    std::vector<Work> works;
    for (int i = 0; i < kMessages; ++i)
      works.push_back(
          comm.send_async(std::as_bytes(std::span(&sent[i], 1)), next, static_cast<std::uint32_t>(i % 3)));
    for (int i = 0; i < kMessages; ++i)
      works.push_back(comm.recv_async(std::as_writable_bytes(std::span(&received[i], 1)), prev,
                                      static_cast<std::uint32_t>(i % 3)));
    for (Work& w : works) w.wait();
    for (int i = 0; i < kMessages; ++i)
      require(received[i] == static_cast<std::uint64_t>(prev) * 1'000'000 + i,
              "message {} from rank {} is {}", i, prev, received[i]);
  });
}

TEST(PointToPoint, EmptyMessagesAreMessages) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> none;
    if (comm.rank() == 0) {
      comm.send(bytes_of(none), 1, 7);
      comm.send(bytes_of(pattern(3, 9)), 1, 7);
    } else {
      std::vector<float> three(3);
      comm.recv(bytes_of(none), 0, 7);
      comm.recv(bytes_of(three), 0, 7);
      require(three == pattern(3, 9), "the message after an empty one");
    }
  });
}

// Both ranks send 1 GiB and receive 1 GiB at once: with blocking sockets both would wait for the other
// to read; the engine moves both directions.
TEST(PointToPoint, TwoRanksExchangeOneGibibyteBothWaysAtOnce) {
  run_group(
      2,
      [](Communicator& comm) {
        constexpr std::size_t kBytes = std::size_t{1} << 30;
        std::vector<std::uint32_t> out(kBytes / 4), in(kBytes / 4, 0);
        for (std::size_t i = 0; i < out.size(); i += 4096)
          out[i] = static_cast<std::uint32_t>(i) ^ comm.rank();
        const int other = 1 - comm.rank();
        Work r = comm.recv_async(bytes_of(in), other);
        Work s = comm.send_async(bytes_of(out), other);
        s.wait();
        r.wait();
        for (std::size_t i = 0; i < in.size(); i += 4096)
          require(in[i] == (static_cast<std::uint32_t>(i) ^ static_cast<std::uint32_t>(other)),
                  "word {} is wrong", i);
      },
      std::chrono::seconds(60));
}

// A pipeline stage sends activations while a gradient all-reduce runs; the receiving stage posts its
// receive before its own all-reduce. Sequenced with the collectives, this would deadlock.
TEST(PointToPoint, MovesWhileACollectiveIsInFlight) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> gradients(4 << 20, 1.0f);
    const std::vector<float> activations = pattern(1 << 18, 5);
    if (comm.rank() == 0) {
      Work reduce = comm.all_reduce_async(std::span(gradients));
      comm.send(bytes_of(activations), 1, 3);
      reduce.wait();
    } else {
      std::vector<float> got(activations.size());
      Work receive = comm.recv_async(bytes_of(got), 0, 3);
      receive.wait();  // before this rank's all-reduce starts
      Work reduce = comm.all_reduce_async(std::span(gradients));
      reduce.wait();
      require(got == activations, "activations");
    }
    require(gradients[12345] == 2.0f, "gradients: {}", gradients[12345]);
  });
}

// A receive of the wrong size: a Mismatch naming both sides, and not a byte written.
TEST(PointToPoint, AReceiveOfTheWrongSizeIsAMismatchBeforeAnyByteLands) {
  for (std::size_t n : {std::size_t{100}, std::size_t{100'000}}) {  // eager and rendezvous
    run_group(2, [n](Communicator& comm) {
      if (comm.rank() == 0) {
        try {
          comm.send(bytes_of(pattern(n, 1)), 1, 4);
          comm.barrier();  // rank 1's failure reaches this rank
          require(false, "rank 0 went on");
        } catch (const Error& e) {
          require(std::string(e.what()).find("mismatch") != std::string::npos, "rank 0 got: {}", e.what());
        }
        return;
      }
      std::vector<float> small(n / 2, -7.0f);
      try {
        comm.recv(bytes_of(small), 0, 4);
        require(false, "no error");
      } catch (const Error& e) {
        const std::string what = e.what();
        require(e.code() == ErrorCode::Mismatch, "code {}: {}", to_string(e.code()), what);
        require(
            what.find(fmt::format("recv of {} bytes from rank 0 with tag 4", n * 2)) != std::string::npos &&
                what.find(fmt::format("send of {} bytes with tag 4", n * 4)) != std::string::npos,
            "the message names both sides: {}", what);
      }
      require(small == std::vector<float>(n / 2, -7.0f), "bytes landed in the receive's buffer");
    });
  }
}

TEST(PointToPoint, AReceiveFromAPeerThatDiesFailsAtOnceNamingIt) {
  run_group(2, [](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::_exit(0);  // no destructor: as a crash
    }
    std::vector<float> got(10);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.recv(bytes_of(got), 0);
      require(false, "no error");
    } catch (const Error& e) {
      require(e.code() == ErrorCode::PeerFailed && std::string(e.what()).find("rank 0") != std::string::npos,
              "{}: {}", to_string(e.code()), e.what());
    }
    require(std::chrono::steady_clock::now() - start < std::chrono::seconds(5), "took until the deadline");
  });
}

TEST(PointToPoint, AReceiveThatNothingAnswersTimesOutListingWhatWasPending) {
  run_group(
      2,
      [](Communicator& comm) {
        if (comm.rank() == 1) {
          std::vector<float> got(10);
          try {
            comm.recv(bytes_of(got), 0, 11);
            require(false, "no error");
          } catch (const Error& e) {
            const std::string what = e.what();
            require(e.code() == ErrorCode::Timeout, "{}: {}", to_string(e.code()), what);
            require(what.find("recv of 40 bytes from rank 0 with tag 11 timed out") != std::string::npos &&
                        what.find("pending point-to-point operations") != std::string::npos,
                    "{}", what);
          }
        } else {
          std::this_thread::sleep_for(std::chrono::seconds(3));
        }
      },
      std::chrono::seconds(1));
}

TEST(PointToPoint, AbortWakesAWaitingReceive) {
  run_group(2, [](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.barrier();
      std::this_thread::sleep_for(std::chrono::seconds(1));  // stays, sending nothing
      return;
    }
    std::vector<float> got(10);
    Work receive = comm.recv_async(bytes_of(got), 0);
    comm.barrier();
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      comm.abort("the test gives up");
    });
    std::string outcome = "no error";
    try {
      receive.wait();
    } catch (const Error& e) {
      outcome = fmt::format("{}: {}", to_string(e.code()), e.what());
    }
    aborter.join();
    require(outcome.find("aborted") == 0 && outcome.find("the test gives up") != std::string::npos, "{}", outcome);
  });
}

// A communicator destroyed with receives still pending ends them (Aborted) instead of hanging.
TEST(PointToPoint, DestroyingTheCommunicatorEndsWhatIsPending) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> got(10);
    Work pending;
    const int rank = comm.rank();
    {
      Communicator doomed = std::move(comm);
      doomed.barrier();
      // Whether rank 0 has gone already (its connection closes: PeerFailed) or not (Aborted here), the
      // receive ends with an error when this communicator goes.
      if (rank == 1) pending = doomed.recv_async(bytes_of(got), 0, 9);
    }
    if (rank == 1)
      require(pending.completed() && pending.error() != nullptr, "the receive did not end with an error");
  });
}

TEST(PointToPoint, BadPeersAreInvalidArguments) {
  run_group(2, [](Communicator& comm) {
    std::vector<float> v(1);
    for (int peer : {-1, comm.rank(), 2}) {
      try {
        comm.send(bytes_of(v), peer);
        require(false, "peer {} accepted", peer);
      } catch (const Error& e) {
        require(e.code() == ErrorCode::InvalidArgument, "{}", e.what());
      }
    }
  });
}

// A receive from any source (torch's recv with src=None): each message lands once, with its sender named,
// whether it came eagerly or after asking (the 400 KB round), and whether the receives came first or not.
TEST(PointToPoint, AReceiveFromAnySourceTakesEachRanksMessageAndNamesTheSender) {
  run_group(4, [](Communicator& comm) {
    for (std::size_t floats : {std::size_t{10}, std::size_t{100000}}) {
      const auto tag = static_cast<std::uint32_t>(floats);
      if (comm.rank() != 0) {
        comm.send(bytes_of(pattern(floats, static_cast<float>(comm.rank()))), 0, tag);
        continue;
      }
      std::vector<std::vector<float>> got(3, std::vector<float>(floats));
      std::vector<int> sources(3, -1);
      std::vector<Work> works;
      for (int i = 0; i < 3; ++i) works.push_back(comm.recv_any_async(bytes_of(got[i]), sources[i], tag));
      for (Work& work : works) work.wait();
      std::vector<int> seen;
      for (int i = 0; i < 3; ++i) {
        require(got[i] == pattern(floats, static_cast<float>(sources[i])),
                "{} floats: receive {} holds other data than rank {}'s", floats, i, sources[i]);
        seen.push_back(sources[i]);
      }
      std::sort(seen.begin(), seen.end());
      require(seen == std::vector<int>{1, 2, 3}, "{} floats: senders {}, {}, {}", floats, seen[0], seen[1],
              seen[2]);
    }
    comm.barrier();
    // The messages now come before the receive: kept, then taken one each.
    if (comm.rank() != 0) comm.send(bytes_of(pattern(5, static_cast<float>(comm.rank()))), 0, 9);
    comm.barrier();
    if (comm.rank() == 0) {
      std::vector<int> seen;
      for (int i = 0; i < 3; ++i) {
        std::vector<float> got(5);
        const int source = comm.recv_any(bytes_of(got), 9);
        require(got == pattern(5, static_cast<float>(source)), "a kept message from rank {} differs", source);
        seen.push_back(source);
      }
      std::sort(seen.begin(), seen.end());
      require(seen == std::vector<int>{1, 2, 3}, "kept messages came from {}, {}, {}", seen[0], seen[1], seen[2]);
    }
  });
}

// MPI's order: a receive naming rank 1 posted before a receive from any source takes rank 1's message,
// whichever message comes first.
TEST(PointToPoint, AReceivePostedEarlierNamingThePeerTakesItsMessageFirst) {
  run_group(3, [](Communicator& comm) {
    std::vector<float> named(4), any(4);
    int source = -1;
    Work named_work, any_work;
    if (comm.rank() == 0) {
      named_work = comm.recv_async(bytes_of(named), 1, 3);
      any_work = comm.recv_any_async(bytes_of(any), source, 3);
    }
    comm.barrier();  // both receives are posted before either message leaves
    if (comm.rank() != 0) comm.send(bytes_of(pattern(4, static_cast<float>(comm.rank()))), 0, 3);
    if (comm.rank() == 0) {
      named_work.wait();
      any_work.wait();
      require(named == pattern(4, 1) && any == pattern(4, 2) && source == 2,
              "named got {}, any got {} from rank {}", named[0], any[0], source);
    }
  });
}

TEST(PointToPoint, AReceiveFromAnySourceThatNothingAnswersTimesOutSayingSo) {
  run_group(
      2,
      [](Communicator& comm) {
        if (comm.rank() == 0) {
          std::vector<float> got(2);
          try {
            (void)comm.recv_any(bytes_of(got), 4);
            require(false, "no error");
          } catch (const Error& e) {
            const std::string what = e.what();
            require(e.code() == ErrorCode::Timeout &&
                        what.find("recv of 8 bytes from any rank with tag 4 timed out") != std::string::npos &&
                        what.find("no rank sent such a message") != std::string::npos,
                    "{}", what);
          }
        } else {
          std::this_thread::sleep_for(std::chrono::seconds(3));
        }
      },
      std::chrono::seconds(1));
}

}  // namespace
}  // namespace canopy
