#include "chunk/s3fifo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace tierfs {
namespace {

TEST(S3Fifo, NewBlocksLeaveFirstUnlessReadAgain) {
  S3Fifo p(1000);
  std::vector<uint64_t> ev;
  for (uint64_t k = 1; k <= 10; ++k) ASSERT_TRUE(p.Insert(k, 100, &ev));
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(p.bytes(), 1000u);
  p.Touch(1);
  p.Touch(2);
  ASSERT_TRUE(p.Insert(11, 100, &ev));
  // 1 and 2 were read again: they move to the main queue; 3 is the oldest one-hit block.
  ASSERT_EQ(ev, std::vector<uint64_t>{3});
  EXPECT_TRUE(p.Contains(1));
  EXPECT_TRUE(p.Contains(2));
  EXPECT_EQ(p.bytes(), 1000u);
}

TEST(S3Fifo, GhostsGoStraightToMain) {
  S3Fifo p(1000);
  std::vector<uint64_t> ev;
  for (uint64_t k = 1; k <= 11; ++k) p.Insert(k, 100, &ev);
  ASSERT_EQ(ev, std::vector<uint64_t>{1});
  ev.clear();
  p.Insert(1, 100, &ev);  // a ghost: enters the main queue
  EXPECT_TRUE(p.Contains(1));
  ev.clear();
  for (uint64_t k = 100; k < 120; ++k) p.Insert(k, 100, &ev);
  // A scan of new blocks flows through the small queue; 1 is evicted from main only once
  // the small queue is down to its tenth.
  EXPECT_EQ(p.bytes(), 1000u);
}

TEST(S3Fifo, ScanResistanceAgainstLru) {
  // A hot set of 40% of the cache read twice per round, and between rounds a scan of 5x the
  // cache read once: the hot set must stay.
  S3Fifo p(100 * 4096);
  std::vector<uint64_t> ev;
  uint64_t next = 1'000'000;
  for (int round = 0; round < 5; ++round) {
    for (uint64_t k = 0; k < 40; ++k) {
      if (!p.Touch(k)) p.Insert(k, 4096, &ev);
      p.Touch(k);
    }
    for (int i = 0; i < 500; ++i) p.Insert(next++, 4096, &ev);
  }
  int kept = 0;
  for (uint64_t k = 0; k < 40; ++k) kept += p.Contains(k);
  EXPECT_EQ(kept, 40);
  EXPECT_LE(p.bytes(), p.capacity());
}

TEST(S3Fifo, EraseTrimRestoreAndOversize) {
  S3Fifo p(1000);
  std::vector<uint64_t> ev;
  EXPECT_FALSE(p.Insert(1, 1001, &ev));
  EXPECT_FALSE(p.Contains(1));
  p.Insert(2, 300, &ev);
  p.Insert(2, 500, &ev);  // replaces
  EXPECT_EQ(p.bytes(), 500u);
  EXPECT_EQ(p.SizeOf(2), 500u);
  EXPECT_TRUE(p.Erase(2));
  EXPECT_FALSE(p.Erase(2));
  EXPECT_EQ(p.bytes(), 0u);
  for (uint64_t k = 10; k < 20; ++k) p.Restore(k, 100);
  EXPECT_EQ(p.count(), 10u);
  auto entries = p.Entries();
  ASSERT_EQ(entries.size(), 10u);
  EXPECT_EQ(entries.front().first, 10u);  // oldest first
  p.Trim(500, &ev);
  EXPECT_EQ(p.bytes(), 500u);
  EXPECT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev.front(), 10u);
}

TEST(S3Fifo, RandomOperationsKeepAccounting) {
  S3Fifo p(50'000);
  std::mt19937 rng(7);
  std::map<uint64_t, uint64_t> model;
  std::vector<uint64_t> ev;
  for (int i = 0; i < 200'000; ++i) {
    uint64_t k = rng() % 2000;
    switch (rng() % 4) {
      case 0: {
        uint64_t size = 1 + rng() % 1000;
        ev.clear();
        if (p.Insert(k, size, &ev)) model[k] = size;
        for (uint64_t e : ev) model.erase(e);
        break;
      }
      case 1:
        p.Erase(k);
        model.erase(k);
        break;
      default:
        EXPECT_EQ(p.Touch(k), model.count(k) != 0);
    }
  }
  uint64_t bytes = 0;
  for (auto& [k, v] : model) bytes += v;
  EXPECT_EQ(p.bytes(), bytes);
  EXPECT_EQ(p.count(), model.size());
  EXPECT_LE(p.bytes(), p.capacity());
  EXPECT_EQ(p.Entries().size(), model.size());
}

TEST(S3Fifo, HitsWithinTheCorrelatedPeriodCountOnce) {
  S3Fifo p(1000, /*correlated_ms=*/1000);
  std::vector<uint64_t> ev;
  for (uint64_t k = 1; k <= 10; ++k) p.Insert(k, 100, &ev, /*now_ms=*/5000);
  // Block 1 is read many times right after insertion (one stream), block 2 again later.
  for (int i = 0; i < 32; ++i) p.Touch(1, 5000 + i);
  p.Touch(2, 7000);
  p.Insert(11, 100, &ev, 7000);
  p.Insert(12, 100, &ev, 7000);
  // 1 had no counted hit: evicted first; 2 moved to the main queue; then 3.
  EXPECT_EQ(ev, (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(p.Contains(2));
}

}  // namespace
}  // namespace tierfs
