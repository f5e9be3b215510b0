#include "chunk/cached_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "chunk/block_key.h"
#include "chunk/fake_store_for_test.h"
#include "chunk/slice_writer.h"

namespace tierfs {
namespace {

using testing::FakeStore;
using testing::RandomBytes;

class CachedStoreTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kBlock = 64 << 10;

  void Make(StoreConfig cfg = {}) {
    if (cfg.volume.empty()) cfg.volume = "vol";
    if (cfg.block_size == StoreConfig{}.block_size) cfg.block_size = kBlock;
    auto fake = std::make_unique<FakeStore>();
    fake_ = fake.get();
    store_ = std::make_unique<CachedStore>(std::move(fake), cfg);
  }

  // Stores slice `id` directly in the fake, block by block, and returns its bytes.
  std::string PutSlice(uint64_t id, uint32_t size) {
    std::string data = RandomBytes(size, static_cast<uint32_t>(id));
    uint32_t bs = store_->config().block_size;
    for (uint32_t i = 0; i < BlockCount(size, bs); ++i) {
      fake_->Set(Key(id, i, size), data.substr(uint64_t{i} * bs, BlockLength(size, bs, i)));
    }
    return data;
  }

  std::string Key(uint64_t id, uint32_t index, uint32_t size) {
    uint32_t bs = store_->config().block_size;
    return BlockKey(store_->config().volume, id, index, BlockLength(size, bs, index));
  }

  Result<std::string> Read(uint64_t id, uint32_t size, uint32_t off, uint32_t len) {
    std::string out(len, '\0');
    Status st = store_->ReadSlice(id, size, off, len, out.data());
    if (!st.ok()) return st;
    return out;
  }

  FakeStore* fake_ = nullptr;
  std::unique_ptr<CachedStore> store_;
};

TEST_F(CachedStoreTest, ReadsWholeAndPartialRanges) {
  Make();
  const uint32_t size = 3 * kBlock + 1234;
  std::string data = PutSlice(7, size);
  // Skipping the first byte keeps block 0 from being consumed whole (which bypasses the
  // cache, see WholeBlockReadsBypassTheCache).
  auto all = Read(7, size, 1, size - 1);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(*all == data.substr(1));
  std::mt19937 rng(1);
  for (int i = 0; i < 200; ++i) {
    uint32_t off = rng() % size;
    uint32_t len = rng() % (size - off + 1);
    auto got = Read(7, size, off, len);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got == data.substr(off, len)) << off << "+" << len;
  }
  // Everything was cached by the first full read: one get per block.
  EXPECT_EQ(fake_->gets.load(), 4);
  EXPECT_GT(store_->stats().cache_hits, 0u);
}

TEST_F(CachedStoreTest, ReadPastEndIsInvalid) {
  Make();
  PutSlice(1, 1000);
  auto got = Read(1, 1000, 900, 101);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EINVAL);
  auto empty = Read(1, 1000, 1000, 0);
  EXPECT_TRUE(empty.ok());
}

TEST_F(CachedStoreTest, ConcurrentReadersOfOneBlockShareOneGet) {
  Make();
  std::string data = PutSlice(9, kBlock);
  fake_->get_delay_ms = 300;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      uint32_t off = t * 1024;
      uint32_t len = kBlock / 2;  // large enough to go through the cache
      auto got = Read(9, kBlock, off, len);
      if (got.ok() && *got == data.substr(off, len)) good++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 16);
  EXPECT_EQ(fake_->gets.load(), 1);
}

// Readers that each consume a whole block (O_DIRECT readers of a small file, aligned
// large reads) share its fetch like any others: one GET, whether the block is a small
// file's (kept in memory) or full-size (not kept).
TEST_F(CachedStoreTest, ConcurrentWholeBlockReadersShareOneGet) {
  Make();
  for (uint32_t size : {kBlock / 3, kBlock}) {
    uint64_t id = size == kBlock ? 21 : 20;
    std::string data = PutSlice(id, size);
    fake_->gets = 0;
    fake_->get_delay_ms = 300;
    std::vector<std::thread> threads;
    std::atomic<int> good{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        auto got = Read(id, size, 0, size);
        if (got.ok() && *got == data) good++;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(good.load(), 8) << size;
    EXPECT_EQ(fake_->gets.load(), 1) << size;
    EXPECT_EQ(store_->cache()->Contains(Key(id, 0, size)), size < kBlock) << size;
  }
}

// A fetch that failed after waiting for the store (hung or unreachable) fails again at once
// for a few seconds, whatever the read's size: the kernel reads a page again after a failed
// readahead, and would otherwise wait the whole --io-timeout a second time.
TEST_F(CachedStoreTest, ASlowFailureFailsAgainWithoutAskingTheStore) {
  Make();
  PutSlice(22, kBlock);
  fake_->get_errno = EIO;
  fake_->get_delay_ms = 1100;
  auto first = Read(22, kBlock, 0, kBlock / 2);
  EXPECT_EQ(first.status().code(), EIO);
  EXPECT_EQ(fake_->gets.load(), 1);
  fake_->get_delay_ms = 0;
  auto again = Read(22, kBlock, 0, 4096);  // a small read: would be a ranged get
  EXPECT_EQ(again.status().code(), EIO);
  EXPECT_EQ(again.status().message(), first.status().message());
  EXPECT_EQ(fake_->gets.load(), 1);
  // A quick failure is not remembered.
  PutSlice(23, kBlock);
  EXPECT_EQ(Read(23, kBlock, 0, kBlock / 2).status().code(), EIO);
  EXPECT_EQ(Read(23, kBlock, 0, kBlock / 2).status().code(), EIO);
  EXPECT_EQ(fake_->gets.load(), 3);
  // Nor a missing block, however slow the answer: it may land any moment (a write-back
  // client uploading it).
  fake_->get_errno = ENOENT;
  fake_->get_delay_ms = 1100;
  EXPECT_EQ(Read(24, kBlock, 0, kBlock / 2).status().code(), EIO);
  fake_->get_delay_ms = 0;
  EXPECT_EQ(Read(24, kBlock, 0, kBlock / 2).status().code(), EIO);
  EXPECT_EQ(fake_->gets.load(), 5);
}

TEST_F(CachedStoreTest, ConcurrentFailureIsReportedToEveryWaiter) {
  Make();
  fake_->get_delay_ms = 200;
  std::vector<std::thread> threads;
  std::atomic<int> eio{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto got = Read(5, kBlock, 0, kBlock);
      if (!got.ok() && got.status().code() == EIO) eio++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(eio.load(), 8);
  // Failures are not cached, so a reader arriving after the failed fetch tries again.
  EXPECT_GE(fake_->gets.load(), 1);
}

TEST_F(CachedStoreTest, MissingBlockIsEioNamingTheKey) {
  Make();
  const uint32_t size = 2 * kBlock;
  PutSlice(3, size);
  fake_->Remove(Key(3, 1, size));
  auto first = Read(3, size, 0, 100);
  EXPECT_TRUE(first.ok());
  for (uint32_t len : {uint32_t{100}, kBlock}) {  // ranged and whole-block paths
    auto got = Read(3, size, kBlock, len);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), EIO);
    EXPECT_NE(got.status().message().find(Key(3, 1, size)), std::string::npos) << got.status().message();
  }
}

TEST_F(CachedStoreTest, WrongSizedBlockIsCorrupt) {
  Make();
  const uint32_t size = kBlock;
  PutSlice(4, size);
  fake_->Set(Key(4, 0, size), std::string(100, 'x'));
  for (uint32_t off : {uint32_t{0}, kBlock - 10}) {
    auto got = Read(4, size, off, off == 0 ? kBlock : 10);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), EIO);
    EXPECT_NE(got.status().message().find(Key(4, 0, size)), std::string::npos) << got.status().message();
  }
}

TEST_F(CachedStoreTest, OtherStoreErrorsKeepTheirCodeAndNameTheKey) {
  Make();
  PutSlice(6, kBlock);
  fake_->get_errno = EACCES;
  auto got = Read(6, kBlock, 0, kBlock);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EACCES);
  EXPECT_NE(got.status().message().find(Key(6, 0, kBlock)), std::string::npos);
  // Errors are not cached: the next read retries.
  fake_->get_errno = 0;
  EXPECT_TRUE(Read(6, kBlock, 0, kBlock).ok());
}

TEST_F(CachedStoreTest, SmallRandomReadsAreRangedAndNotCached) {
  Make();
  std::string data = PutSlice(11, 2 * kBlock);
  auto got = Read(11, 2 * kBlock, 1000, 4096);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data.substr(1000, 4096));
  EXPECT_EQ(fake_->ranged_gets.load(), 1);
  EXPECT_FALSE(store_->cache()->Contains(Key(11, 0, 2 * kBlock)));
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  ASSERT_TRUE(Read(11, 2 * kBlock, 5000, 100).ok());
  EXPECT_EQ(fake_->ranged_gets.load(), 2);
  // A small read straddling two blocks: two ranged gets.
  got = Read(11, 2 * kBlock, kBlock - 50, 100);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data.substr(kBlock - 50, 100));
  EXPECT_EQ(fake_->ranged_gets.load(), 4);
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  // A large read caches the block, after which small reads are served from memory.
  ASSERT_TRUE(Read(11, 2 * kBlock, 0, kBlock / 2).ok());
  EXPECT_TRUE(store_->cache()->Contains(Key(11, 0, 2 * kBlock)));
  int gets = fake_->gets.load();
  got = Read(11, 2 * kBlock, 7, 3);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data.substr(7, 3));
  EXPECT_EQ(fake_->gets.load(), gets);
}

TEST_F(CachedStoreTest, WholeBlockReadsBypassTheCache) {
  Make();
  std::string data = PutSlice(13, kBlock);
  auto got = Read(13, kBlock, 0, kBlock);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data);
  EXPECT_EQ(fake_->gets.load(), 1);
  EXPECT_EQ(fake_->ranged_gets.load(), 0);
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  // A cached block still serves whole reads.
  store_->Prefetch(13, kBlock, 0, kBlock);
  for (int i = 0; i < 500 && !store_->cache()->Contains(Key(13, 0, kBlock)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(store_->cache()->Contains(Key(13, 0, kBlock)));
  ASSERT_TRUE(Read(13, kBlock, 0, kBlock).ok());
  EXPECT_EQ(fake_->gets.load(), 2);
}

TEST_F(CachedStoreTest, SmallReadJoinsAnInFlightFetch) {
  Make();
  std::string data = PutSlice(12, kBlock);
  fake_->get_delay_ms = 300;
  std::thread big([&] { EXPECT_TRUE(Read(12, kBlock, 0, kBlock - 1).ok()); });
  // Wait until the whole-block get has started.
  for (int i = 0; i < 500 && fake_->gets.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto got = Read(12, kBlock, 10, 10);
  big.join();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data.substr(10, 10));
  EXPECT_EQ(fake_->gets.load(), 1);
  EXPECT_EQ(fake_->ranged_gets.load(), 0);
}

TEST_F(CachedStoreTest, PrefetchFillsTheCache) {
  Make();
  const uint32_t size = 4 * kBlock;
  std::string data = PutSlice(21, size);
  store_->Prefetch(21, size, 0, size);
  for (int i = 0; i < 1000 && store_->stats().cache_blocks < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(store_->stats().cache_blocks, 4u);
  EXPECT_EQ(fake_->gets.load(), 4);
  // Cached or in flight blocks are not fetched again.
  store_->Prefetch(21, size, 0, size);
  auto got = Read(21, size, 0, size);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data);
  EXPECT_EQ(fake_->gets.load(), 4);
}

TEST_F(CachedStoreTest, PrefetchFailureIsOnlyLoggedAndReadReportsIt) {
  Make();
  store_->Prefetch(22, kBlock, 0, kBlock);  // missing slice
  for (int i = 0; i < 1000 && fake_->gets.load() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto got = Read(22, kBlock, 0, kBlock);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_GE(fake_->gets.load(), 1);
}

TEST_F(CachedStoreTest, MultiBlockReadFetchesInParallel) {
  StoreConfig cfg;
  cfg.download_threads = 8;
  Make(cfg);
  const uint32_t size = 8 * kBlock;
  std::string data = PutSlice(30, size);
  fake_->get_delay_ms = 100;
  auto got = Read(30, size, 0, size);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data);
  EXPECT_EQ(fake_->gets.load(), 8);
}

TEST_F(CachedStoreTest, DeleteSliceRemovesBlocksAndCache) {
  Make();
  const uint32_t size = 2 * kBlock + 10;
  PutSlice(40, size);
  PutSlice(41, 100);
  ASSERT_TRUE(Read(40, size, 1, size - 1).ok());
  EXPECT_EQ(store_->stats().cache_blocks, 3u);
  fake_->Remove(Key(40, 2, size));  // a missing block is fine
  ASSERT_TRUE(store_->DeleteSlice(40, size).ok());
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  EXPECT_EQ(fake_->Count(), 1u);
  EXPECT_TRUE(fake_->Has(Key(41, 0, 100)));
  auto got = Read(40, size, 0, 10);
  EXPECT_FALSE(got.ok());
  EXPECT_TRUE(store_->DeleteSlice(40, size).ok());
  EXPECT_TRUE(store_->DeleteSlice(99, 0).ok());
}

TEST_F(CachedStoreTest, CacheCapacityIsRespected) {
  StoreConfig cfg;
  cfg.cache_bytes = 2 * kBlock;
  Make(cfg);
  const uint32_t size = 5 * kBlock;
  std::string data = PutSlice(50, size);
  auto got = Read(50, size, 0, size);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data);
  EXPECT_LE(store_->stats().cache_bytes, 2u * kBlock);
}

TEST_F(CachedStoreTest, WaitForBufferRoomReturnsWhenNothingUploads) {
  StoreConfig cfg;
  cfg.buffer_bytes = 0;
  Make(cfg);
  EXPECT_TRUE(store_->WaitForBufferRoom());  // nothing buffered
  auto w = store_->NewSliceWriter(1);
  ASSERT_TRUE(w->Write(0, std::string(1000, 'a')));
  EXPECT_EQ(store_->buffered_bytes(), 1000u);
  // Buffered but not uploading: waiting must not deadlock, and says there is no room.
  EXPECT_FALSE(store_->WaitForBufferRoom());
  w->Abort();
  EXPECT_EQ(store_->buffered_bytes(), 0u);
}

TEST_F(CachedStoreTest, WaitForBufferRoomWaitsForUploads) {
  StoreConfig cfg;
  cfg.upload_threads = 4;
  cfg.buffer_bytes = kBlock;
  Make(cfg);
  fake_->HoldPuts(true);
  auto w = store_->NewSliceWriter(2);
  std::string data = RandomBytes(4 * kBlock, 2);
  ASSERT_TRUE(w->Write(0, data));
  EXPECT_EQ(store_->buffered_bytes(), 4u * kBlock);
  EXPECT_EQ(store_->stats().uploads_in_flight, 4u);
  std::atomic<bool> returned{false};
  bool room = false;
  std::thread waiter([&] {
    room = store_->WaitForBufferRoom();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(returned.load());
  fake_->HoldPuts(false);
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_TRUE(room);
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  EXPECT_EQ(store_->stats().uploads_in_flight, 0u);
  auto got = Read(2, 4 * kBlock, 0, 4 * kBlock);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == data);
}

TEST_F(CachedStoreTest, StatsCountTraffic) {
  Make();
  auto w = store_->NewSliceWriter(3);
  ASSERT_TRUE(w->Write(0, std::string(kBlock + 5, 'z')));
  ASSERT_TRUE(w->Finish().ok());
  StoreStats s = store_->stats();
  EXPECT_EQ(s.puts, 2u);
  EXPECT_EQ(s.bytes_uploaded, kBlock + 5u);
  store_->cache()->Clear();
  ASSERT_TRUE(Read(3, kBlock + 5, 0, kBlock + 5).ok());
  s = store_->stats();
  EXPECT_EQ(s.bytes_downloaded, kBlock + 5u);
  EXPECT_EQ(s.gets, 2u);
}

}  // namespace
}  // namespace tierfs
