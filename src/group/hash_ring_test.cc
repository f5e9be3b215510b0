// HashRing: balance, weights, and how many keys move when a member joins or leaves.
#include "group/hash_ring.h"

#include <gtest/gtest.h>

#include <map>

namespace tierfs {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("vol/chunks/" + std::to_string(i % 97) + "/" + std::to_string(i) + "_0_4194304");
  return keys;
}

std::map<std::string, int> Shares(const HashRing& ring, const std::vector<std::string>& keys) {
  std::map<std::string, int> n;
  for (const auto& k : keys) n[ring.members()[ring.Owner(k)].id]++;
  return n;
}

TEST(HashRingTest, EmptyRingHasNoOwner) {
  HashRing ring;
  EXPECT_EQ(ring.Owner("k"), -1);
  EXPECT_EQ(HashRing(std::vector<RingMember>{}).Owner("k"), -1);
}

TEST(HashRingTest, EqualMembersGetAboutEqualShares) {
  HashRing ring({{"10.0.0.1:9000", 100 * kGiB}, {"10.0.0.2:9000", 100 * kGiB}, {"10.0.0.3:9000", 100 * kGiB},
                 {"10.0.0.4:9000", 100 * kGiB}});
  auto keys = Keys(40000);
  auto shares = Shares(ring, keys);
  ASSERT_EQ(shares.size(), 4u);
  for (const auto& [id, n] : shares) {
    EXPECT_GT(n, 10000 * 0.75) << id;
    EXPECT_LT(n, 10000 * 1.25) << id;
  }
}

TEST(HashRingTest, SharesFollowCapacity) {
  HashRing ring({{"a:1", 400 * kGiB}, {"b:1", 100 * kGiB}});
  auto shares = Shares(ring, Keys(40000));
  double ratio = static_cast<double>(shares["a:1"]) / shares["b:1"];
  EXPECT_GT(ratio, 2.5);
  EXPECT_LT(ratio, 6.0);
}

TEST(HashRingTest, OrderOfTheMemberListDoesNotMatter) {
  HashRing a({{"x:1", kGiB * 50}, {"y:1", kGiB * 50}, {"z:1", kGiB * 50}});
  HashRing b({{"z:1", kGiB * 50}, {"x:1", kGiB * 50}, {"y:1", kGiB * 50}, {"x:1", kGiB * 50}});
  for (const auto& k : Keys(2000)) EXPECT_EQ(a.members()[a.Owner(k)].id, b.members()[b.Owner(k)].id);
}

// A join moves about 1/N of the keys, all of them to the new member; a leave moves only the
// leaving member's keys.
TEST(HashRingTest, JoinAndLeaveMoveAboutOneNth) {
  std::vector<RingMember> four = {{"m1:1", 100 * kGiB}, {"m2:1", 100 * kGiB}, {"m3:1", 100 * kGiB},
                                  {"m4:1", 100 * kGiB}};
  std::vector<RingMember> five = four;
  five.push_back({"m5:1", 100 * kGiB});
  HashRing before(four), after(five);
  auto keys = Keys(50000);
  int moved = 0;
  for (const auto& k : keys) {
    std::string was = before.members()[before.Owner(k)].id, is = after.members()[after.Owner(k)].id;
    if (was != is) {
      ++moved;
      EXPECT_EQ(is, "m5:1") << k;
    }
  }
  EXPECT_GT(moved, 50000 / 5 * 0.7);
  EXPECT_LT(moved, 50000 / 5 * 1.3);

  std::vector<RingMember> three(four.begin() + 1, four.end());  // m1 leaves
  HashRing left(three);
  for (const auto& k : keys) {
    std::string was = before.members()[before.Owner(k)].id, is = left.members()[left.Owner(k)].id;
    if (was != "m1:1") {
      EXPECT_EQ(was, is) << k;
    }
  }
}

TEST(HashRingTest, VnodesAreBounded) {
  EXPECT_EQ(VnodesFor(0), kMinVnodes);
  EXPECT_EQ(VnodesFor(100 * kGiB), 100);
  EXPECT_EQ(VnodesFor(1ull << 50), kMaxVnodes);
}

}  // namespace
}  // namespace tierfs
