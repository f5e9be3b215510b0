#include "common/segment_hasher.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "common/hash.h"

namespace tierfs {
namespace {

constexpr uint32_t kSeg = 64 << 10;

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<uint32_t> Direct(std::string_view v) {
  std::vector<uint32_t> out;
  for (size_t off = 0; off < v.size(); off += kSeg) out.push_back(Checksum32(v.substr(off, kSeg)));
  return out;
}

// Fed as a receiver feeds it: appends of any size into one buffer.
void Receive(std::string* body, std::string_view data, size_t piece) {
  for (size_t off = 0; off < data.size(); off += piece) {
    std::string_view p = data.substr(off, piece);
    body->append(p);
    SegmentHasher::Received(*body, p.size());
  }
}

TEST(SegmentHasher, GivesTheChecksumsOfTheBodyHoweverItArrived) {
  const std::string data = Random(5 * kSeg + 777, 1);
  for (size_t piece : {size_t{1000}, size_t{kSeg}, size_t{kSeg + 1}, size_t{512 << 10}, data.size()}) {
    SegmentHasher h(kSeg);
    std::string body;
    body.reserve(data.size());
    Receive(&body, data, piece);
    EXPECT_EQ(h.Sums(body), Direct(data)) << "pieces of " << piece;
  }
  SegmentHasher h(kSeg);
  std::string grown;  // no room reserved: the buffer moves as it grows
  Receive(&grown, data, 100000);
  EXPECT_EQ(h.Sums(grown), Direct(data));
  EXPECT_TRUE(h.Sums("").empty());
}

// What was hashed during receipt is used only for the very buffer it was hashed in, as it
// is: a copy, a cut, an in-place rewrite through a new body, or another thread's body is
// hashed afresh.
TEST(SegmentHasher, NeverGivesTheChecksumsOfOtherBytes) {
  const std::string a = Random(3 * kSeg, 2), b = Random(2 * kSeg + 5, 3);
  SegmentHasher h(kSeg);
  std::string body;
  body.reserve(4 * kSeg);
  Receive(&body, a, kSeg);
  std::string copy = body;
  copy[10] ^= 1;
  EXPECT_EQ(h.Sums(copy), Direct(copy));
  EXPECT_EQ(h.Sums(std::string_view(body).substr(0, kSeg + 3)), Direct(std::string_view(a).substr(0, kSeg + 3)));
  EXPECT_EQ(h.Sums(std::string_view(body).substr(kSeg)), Direct(std::string_view(a).substr(kSeg)));
  // A second response received into the same buffer (a retry): its first append starts over.
  body.clear();
  Receive(&body, b, 5000);
  EXPECT_EQ(h.Sums(body), Direct(b));
  // Another thread's receipt does not feed this thread's scope.
  std::thread([&] {
    std::string other;
    Receive(&other, a, kSeg);
  }).join();
  EXPECT_EQ(h.Sums(body), Direct(b));
}

TEST(SegmentHasher, TheInnermostScopeIsFedAndNoneWithoutOne) {
  const std::string a = Random(2 * kSeg, 4);
  std::string body;
  Receive(&body, a, kSeg);  // no scope: nothing to do, nothing breaks
  SegmentHasher outer(kSeg);
  {
    SegmentHasher inner(kSeg);
    std::string in;
    Receive(&in, a, kSeg);
    EXPECT_EQ(inner.Sums(in), Direct(a));
  }
  std::string out;
  Receive(&out, a, 4096);
  EXPECT_EQ(outer.Sums(out), Direct(a));
}

}  // namespace
}  // namespace tierfs
