// Sub-communicators between real processes: split and subgroup, their ranks and collectives, splits of
// splits, two communicators used by two threads at once, destruction in any order, and a dead rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "canopy/canopy.hpp"
#include "tests/support/group.hpp"
#include "tests/support/ranks.hpp"

namespace canopy {
namespace {

using testing::require;

void run_group(int ranks, const std::function<void(Communicator&)>& body,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  testing::run_group(ranks, body, testing::group_options("groups-test", timeout));
}

// The sum over `ranks` (global ranks) of rank + 1.
float sum_of(const std::vector<int>& ranks) {
  float total = 0;
  for (int r : ranks) total += static_cast<float>(r + 1);
  return total;
}

TEST(Split, GroupsRanksByColorOrderedByKeyThenRank) {
  run_group(6, [](Communicator& world) {
    // Colors by parity; keys reversed for the even ranks, equal (rank order) for the odd ones.
    const int color = world.rank() % 2;
    Communicator half = world.split(color, color == 0 ? -world.rank() : 0);
    require(half.valid() && half.size() == 3, "size {}", half.size());
    require(half.local_size() == 3 && half.local_rank() == half.rank(), "one host: local {} of {}",
            half.local_rank(), half.local_size());
    const std::vector<int> members = color == 0 ? std::vector<int>{4, 2, 0} : std::vector<int>{1, 3, 5};
    const int expected_rank =
        static_cast<int>(std::find(members.begin(), members.end(), world.rank()) - members.begin());
    require(half.rank() == expected_rank, "rank {} became {} in its half, expected {}", world.rank(),
            half.rank(), expected_rank);
    std::vector<float> v(1000, static_cast<float>(world.rank() + 1));
    half.all_reduce(std::span(v));
    require(v[999] == sum_of(members), "all_reduce in the half: {}", v[999]);
    // A broadcast from the half's rank 0 reaches every member: the ordering is real, not only reported.
    std::vector<int> root_is(1, world.rank());
    half.broadcast(std::span(root_is), 0);
    require(root_is[0] == members[0], "broadcast from half rank 0 came from world rank {}", root_is[0]);
    world.barrier();  // the parent goes on beside its children
  });
}

TEST(Split, ANegativeColorGivesAnEmptyCommunicatorThatRefusesEveryCall) {
  run_group(3, [](Communicator& world) {
    Communicator mine = world.split(world.rank() == 1 ? -1 : 0);
    if (world.rank() != 1) {
      require(mine.valid() && mine.size() == 2, "members");
      mine.barrier();
      return;
    }
    require(!mine.valid(), "rank 1 got a valid communicator");
    for (auto call : std::vector<std::function<void()>>{[&] { (void)mine.rank(); }, [&] { mine.barrier(); },
                                                        [&] { (void)mine.split(0); }}) {
      try {
        call();
        require(false, "an empty communicator accepted a call");
      } catch (const Error& e) {
        require(e.code() == ErrorCode::InvalidArgument &&
                    std::string(e.what()).find("empty") != std::string::npos,
                "{}", e.what());
      }
    }
  });
}

// Three levels: 8 ranks -> halves -> quarters -> pairs, each level a working group.
TEST(Split, ASplitOfASplitOfASplitWorks) {
  run_group(8, [](Communicator& world) {
    Communicator half = world.split(world.rank() / 4);
    Communicator quarter = half.split(half.rank() / 2);
    Communicator single = quarter.split(quarter.rank());
    require(half.size() == 4 && quarter.size() == 2 && single.size() == 1, "sizes {} {} {}", half.size(),
            quarter.size(), single.size());
    const int base = world.rank() / 2 * 2;
    std::vector<float> v(10, static_cast<float>(world.rank() + 1));
    quarter.all_reduce(std::span(v));
    require(v[0] == sum_of({base, base + 1}), "quarter sum {}", v[0]);
    single.all_reduce(std::span(v));
    require(v[0] == sum_of({base, base + 1}), "a group of one changes nothing");
    std::vector<float> g(4);
    const float mine = static_cast<float>(world.rank());
    half.all_gather(std::span(&mine, 1), std::span(g));
    require(g[3] == static_cast<float>(world.rank() / 4 * 4 + 3), "half gather {}", g[3]);
  });
}

TEST(Subgroup, MembersGetTheGroupInTheOrderListedAndTheOthersNone) {
  run_group(5, [](Communicator& world) {
    const std::vector<int> listed{3, 0, 4};
    Communicator group = world.subgroup(listed);
    const auto position = std::find(listed.begin(), listed.end(), world.rank());
    if (position == listed.end()) {
      require(!group.valid(), "rank {} is not listed but got a group", world.rank());
      return;
    }
    require(group.valid() && group.size() == 3 && group.rank() == position - listed.begin(), "rank {} -> {}",
            world.rank(), group.rank());
    std::vector<int> from(1, world.rank());
    group.broadcast(std::span(from), 0);
    require(from[0] == 3, "group rank 0 is world rank {}", from[0]);
  });
}

TEST(Subgroup, RanksThatPassDifferentListsGetAMismatch) {
  run_group(3, [](Communicator& world) {
    const std::vector<int> listed = world.rank() == 2 ? std::vector<int>{0, 2} : std::vector<int>{0, 1};
    try {
      (void)world.subgroup(listed);
      require(false, "no error");
    } catch (const Error& e) {
      require(e.code() == ErrorCode::Mismatch &&
                  std::string(e.what()).find("different lists") != std::string::npos,
              "{}: {}", to_string(e.code()), e.what());
    }
  });
}

TEST(Subgroup, BadListsAreInvalidArguments) {
  run_group(2, [](Communicator& world) {
    for (const std::vector<int>& listed : {std::vector<int>{}, std::vector<int>{0, 0}, std::vector<int>{2}}) {
      try {
        (void)world.subgroup(listed);
        require(false, "accepted");
      } catch (const Error& e) {
        require(e.code() == ErrorCode::InvalidArgument, "{}", e.what());
      }
    }
    world.barrier();  // nothing was sent: the group is still in step
  });
}

// torch's new_group: only the members call, and two disjoint groups form at once.
TEST(CreateGroup, OnlyTheMembersCallAndGroupsFormSideBySide) {
  run_group(5, [](Communicator& world) {
    const std::vector<int> odd{3, 1}, even{0, 2, 4};
    const bool is_odd = world.rank() % 2 == 1;
    Communicator group = is_odd ? world.create_group(odd, "odd") : world.create_group(even, "even");
    const std::vector<int>& members = is_odd ? odd : even;
    require(group.size() == static_cast<int>(members.size()) &&
                members[static_cast<std::size_t>(group.rank())] == world.rank(),
            "rank {} is {} of {}", world.rank(), group.rank(), group.size());
    std::vector<float> v(100, static_cast<float>(world.rank() + 1));
    group.all_reduce(std::span(v));
    require(v[0] == sum_of(members), "{}", v[0]);
    if (world.rank() == 4) {
      try {
        (void)world.create_group(odd, "odd-again");
        require(false, "a rank that is not listed formed a group");
      } catch (const Error& e) {
        require(e.code() == ErrorCode::InvalidArgument, "{}", e.what());
      }
    }
  });
}

TEST(CreateGroup, MembersThatPassDifferentListsFail) {
  run_group(
      2,
      [](Communicator& world) {
        const std::vector<int> listed = world.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
        try {
          (void)world.create_group(listed, "disputed");
          require(false, "no error");
        } catch (const Error& e) {
          // The later one learns of the difference at once; the first waits for a group that never forms.
          require(e.code() == ErrorCode::Mismatch || e.code() == ErrorCode::Timeout, "{}", e.what());
        }
      },
      std::chrono::seconds(2));
}

TEST(Work, OnCompletionRunsOnceWhenTheCallEnds) {
  run_group(2, [](Communicator& world) {
    std::vector<float> v(1 << 16, 1.0f);
    std::atomic<int> calls{0};
    Work work = world.all_reduce_async(std::span(v));
    work.on_completion([&] { calls.fetch_add(1); });
    work.wait();
    for (int i = 0; i < 100 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    require(calls.load() == 1, "called {} times", calls.load());
    work.on_completion([&] { calls.fetch_add(1); });  // already done: runs at once
    require(calls.load() == 2, "a completed call's callback did not run at once");
  });
}

// The 2-D case: a data-parallel all-reduce on one thread, a tensor-parallel all-gather on another, each
// on its own communicator, a thousand calls each.
TEST(Split, TwoThreadsUseTwoCommunicatorsAtOnce) {
  run_group(4, [](Communicator& world) {
    Communicator data_parallel = world.split(world.rank() % 2);
    Communicator tensor_parallel = world.split(world.rank() / 2);
    std::thread gradients([&] {
      std::vector<float> g(64);
      for (int i = 0; i < 1000; ++i) {
        std::fill(g.begin(), g.end(), 1.0f);
        data_parallel.all_reduce(std::span(g));
        require(g[63] == 2.0f, "dp call {}: {}", i, g[63]);
      }
    });
    std::vector<float> shard(16), whole(32);
    for (int i = 0; i < 1000; ++i) {
      std::fill(shard.begin(), shard.end(), static_cast<float>(world.rank() + i));
      tensor_parallel.all_gather(std::span<const float>(shard), std::span(whole));
      require(whole[0] == static_cast<float>(world.rank() / 2 * 2 + i) &&
                  whole[31] == static_cast<float>(world.rank() / 2 * 2 + 1 + i),
              "tp call {}", i);
    }
    gradients.join();
  });
}

TEST(Split, ParentAndChildrenMayBeDestroyedInAnyOrder) {
  run_group(4, [](Communicator& world) {
    auto child = std::make_unique<Communicator>(world.split(world.rank() % 2));
    auto grandchild = std::make_unique<Communicator>(child->split(0));
    {
      Communicator moved = std::move(world);  // the parent goes first...
    }
    std::vector<float> v(8, 1.0f);
    grandchild->all_reduce(std::span(v));  // ...and its descendants still work
    require(v[0] == 2.0f, "grandchild after the parent: {}", v[0]);
    child.reset();
    grandchild->barrier();
    grandchild.reset();
  });
}

// Rank 3 dies: the groups containing it fail naming it; the group without it goes on.
TEST(Split, ADeadRankFailsTheGroupsThatContainItNamingIt) {
  run_group(4, [](Communicator& world) {
    Communicator pair = world.split(world.rank() / 2);  // {0, 1} and {2, 3}
    world.barrier();
    if (world.rank() == 3) ::_exit(0);
    if (world.rank() == 2) {
      std::vector<float> v(1000, 1.0f);
      try {
        pair.all_reduce(std::span(v));
        require(false, "no error");
      } catch (const Error& e) {
        const std::string what = e.what();
        require(e.code() == ErrorCode::PeerFailed && what.find("world rank 3") != std::string::npos, "{}: {}",
                to_string(e.code()), what);
      }
      return;
    }
    std::vector<float> v(1000, 1.0f);
    pair.all_reduce(std::span(v));
    require(v[0] == 2.0f, "the pair without the dead rank: {}", v[0]);
  });
}

}  // namespace
}  // namespace canopy
