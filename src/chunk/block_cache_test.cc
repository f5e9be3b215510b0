#include "chunk/block_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

namespace tierfs {
namespace {

std::shared_ptr<const std::string> Block(size_t n, char c = 'x') {
  return std::make_shared<const std::string>(n, c);
}

TEST(BlockCache, HitsMissesAndBytes) {
  BlockCache cache(1000);
  EXPECT_EQ(cache.Get("a"), nullptr);
  cache.Put("a", Block(100, 'a'));
  auto a = cache.Get("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(*a, std::string(100, 'a'));
  EXPECT_TRUE(cache.Contains("a"));
  EXPECT_NE(cache.Peek("a"), nullptr);
  EXPECT_EQ(cache.Peek("b"), nullptr);
  BlockCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);  // Peek and Contains do not count
  EXPECT_EQ(s.bytes, 100u);
  EXPECT_EQ(s.blocks, 1u);
}

TEST(BlockCache, AScanDoesNotFlushTheHotSet) {
  BlockCache cache(100 * 100, /*correlated_ms=*/0);
  for (int i = 0; i < 50; ++i) cache.Put("hot" + std::to_string(i), Block(100));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 50; ++i) ASSERT_NE(cache.Get("hot" + std::to_string(i)), nullptr);
  }
  // One pass over ten times the capacity.
  for (int i = 0; i < 1000; ++i) cache.Put("scan" + std::to_string(i), Block(100));
  int kept = 0;
  for (int i = 0; i < 50; ++i) kept += cache.Contains("hot" + std::to_string(i));
  EXPECT_EQ(kept, 50);
  EXPECT_LE(cache.stats().bytes, cache.capacity());
  EXPECT_GT(cache.stats().evictions, 900u);
}

TEST(BlockCache, ReplaceEraseAndOversize) {
  BlockCache cache(1000);
  cache.Put("a", Block(100, '1'));
  cache.Put("a", Block(300, '2'));
  EXPECT_EQ(cache.stats().bytes, 300u);
  EXPECT_EQ(cache.stats().blocks, 1u);
  EXPECT_EQ(*cache.Get("a"), std::string(300, '2'));
  cache.Put("big", Block(1001));
  EXPECT_FALSE(cache.Contains("big"));
  EXPECT_TRUE(cache.Contains("a"));
  cache.Put("a", Block(2000));  // an oversize replacement drops the old entry
  EXPECT_FALSE(cache.Contains("a"));
  EXPECT_EQ(cache.stats().bytes, 0u);
  cache.Put("b", Block(10));
  cache.Erase("b");
  cache.Erase("missing");
  EXPECT_FALSE(cache.Contains("b"));
  cache.Put("c", Block(10));
  cache.Put(("d"), nullptr);
  EXPECT_FALSE(cache.Contains("d"));
  cache.Clear();
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(cache.stats().blocks, 0u);
  EXPECT_FALSE(cache.Contains("c"));
}

TEST(BlockCache, ZeroCapacityCachesNothing) {
  BlockCache cache(0);
  cache.Put("a", Block(1));
  EXPECT_FALSE(cache.Contains("a"));
}

TEST(BlockCache, EvictedBlocksStayValidForHolders) {
  BlockCache cache(100);
  cache.Put("a", Block(100, 'a'));
  auto held = cache.Peek("a");
  cache.Put("b", Block(100, 'b'));
  EXPECT_FALSE(cache.Contains("a"));
  EXPECT_EQ(*held, std::string(100, 'a'));
}

TEST(BlockCache, ConcurrentUseKeepsAccountingConsistent) {
  BlockCache cache(50 * 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 20000; ++i) {
        std::string key = "k" + std::to_string(rng() % 200);
        switch (rng() % 4) {
          case 0: cache.Put(key, Block(1 + rng() % 128, key.back())); break;
          case 1: cache.Erase(key); break;
          default:
            if (auto b = cache.Get(key)) {
              ASSERT_EQ(b->back(), key.back());
            }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  BlockCacheStats s = cache.stats();
  EXPECT_LE(s.bytes, cache.capacity());
  uint64_t bytes = 0, blocks = 0;
  for (int k = 0; k < 200; ++k) {
    if (auto b = cache.Peek("k" + std::to_string(k))) {
      bytes += b->size();
      blocks++;
    }
  }
  EXPECT_EQ(bytes, s.bytes);
  EXPECT_EQ(blocks, s.blocks);
}

}  // namespace
}  // namespace tierfs
