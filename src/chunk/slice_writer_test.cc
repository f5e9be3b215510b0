#include "chunk/slice_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "chunk/block_key.h"
#include "chunk/cached_store.h"
#include "chunk/fake_store_for_test.h"
#include "meta/types.h"

namespace tierfs {
namespace {

using testing::FakeStore;
using testing::RandomBytes;

// Polls until pred() or a generous timeout; uploads are asynchronous.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

class SliceWriterTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kBlock = 64 << 10;

  void Make(uint32_t block_size = kBlock, int upload_threads = 4, bool cache_writes = false,
            uint64_t buffer_bytes = StoreConfig{}.buffer_bytes) {
    StoreConfig cfg;
    cfg.volume = "vol";
    cfg.cache_writes = cache_writes;
    cfg.buffer_bytes = buffer_bytes;
    cfg.block_size = block_size;
    cfg.upload_threads = upload_threads;
    auto fake = std::make_unique<FakeStore>();
    fake_ = fake.get();
    store_ = std::make_unique<CachedStore>(std::move(fake), cfg);
  }

  std::string Key(uint64_t id, uint32_t index, uint32_t len) { return BlockKey("vol", id, index, len); }

  FakeStore* fake_ = nullptr;
  std::unique_ptr<CachedStore> store_;
};

TEST_F(SliceWriterTest, StreamsFullBlocksBeforeFinish) {
  Make();
  auto w = store_->NewSliceWriter(1);
  std::string data = RandomBytes(3 * kBlock + 1000, 1);
  // Three full blocks in 4 KiB application writes.
  for (uint32_t off = 0; off < 3 * kBlock; off += 4096) {
    ASSERT_TRUE(w->Write(off, std::string_view(data).substr(off, 4096)));
  }
  // The fake counts a put before it stores the object: wait for the objects themselves.
  EXPECT_TRUE(Eventually([&] {
    return fake_->puts.load() == 3 && fake_->Has(Key(1, 0, kBlock)) && fake_->Has(Key(1, 2, kBlock));
  }));
  // The fourth block is partial: it waits for Finish.
  ASSERT_TRUE(w->Write(3 * kBlock, std::string_view(data).substr(3 * kBlock)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fake_->puts.load(), 3);
  EXPECT_EQ(w->length(), data.size());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(fake_->puts.load(), 4);
  // The partial last block's key carries its real length.
  EXPECT_TRUE(fake_->Has(Key(1, 3, 1000)));
  EXPECT_EQ(fake_->Data(Key(1, 3, 1000)), data.substr(3 * kBlock));
  EXPECT_EQ(fake_->Count(), 4u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
}

TEST_F(SliceWriterTest, WriteEndingExactlyAtABlockBoundaryStartsItsUpload) {
  Make();
  auto w = store_->NewSliceWriter(2);
  ASSERT_TRUE(w->Write(0, std::string(kBlock - 1, 'a')));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fake_->puts.load(), 0);
  ASSERT_TRUE(w->Write(kBlock - 1, "b"));
  EXPECT_TRUE(Eventually([&] { return fake_->puts.load() == 1; }));
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(fake_->Count(), 1u);
  EXPECT_TRUE(fake_->Has(Key(2, 0, kBlock)));
}

TEST_F(SliceWriterTest, WriteRules) {
  Make();
  auto w = store_->NewSliceWriter(3);
  EXPECT_TRUE(w->Write(0, ""));
  EXPECT_FALSE(w->Write(1, "x"));  // past length: would leave a gap
  ASSERT_TRUE(w->Write(0, std::string(kBlock + 100, 'a')));
  // Block 0 is uploading or uploaded: any write touching it is refused and writes nothing.
  EXPECT_FALSE(w->Write(kBlock - 1, "bb"));
  EXPECT_FALSE(w->Write(10, "b"));
  // Block 1 is still buffered: overwrite and append work.
  EXPECT_TRUE(w->Write(kBlock, "cc"));
  EXPECT_TRUE(w->Write(kBlock + 100, "dd"));
  EXPECT_EQ(w->length(), kBlock + 102);
  EXPECT_FALSE(w->Write(kBlock + 103, "e"));
  char buf[4];
  ASSERT_TRUE(w->Read(kBlock, 4, buf));
  EXPECT_EQ(std::string(buf, 4), "ccaa");
  EXPECT_FALSE(w->Read(kBlock + 100, 3, buf));  // past length
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_FALSE(w->Write(kBlock + 102, "f"));  // after Finish
  EXPECT_EQ(fake_->Data(Key(3, 0, kBlock)), std::string(kBlock, 'a'));
  EXPECT_EQ(fake_->Data(Key(3, 1, 102)), "cc" + std::string(98, 'a') + "dd");
  // Finish again returns the same result and uploads nothing more.
  EXPECT_TRUE(w->Finish().ok());
  EXPECT_EQ(fake_->puts.load(), 2);
}

TEST_F(SliceWriterTest, RefusesWritesPastTheChunk) {
  Make();
  auto w = store_->NewSliceWriter(4);
  EXPECT_FALSE(w->Write(0, std::string(kChunkSize + 1, 'x')));
  EXPECT_EQ(w->length(), 0u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
}

TEST_F(SliceWriterTest, BuffersGrowWithTheData) {
  Make(4 << 20);
  auto w = store_->NewSliceWriter(5);
  ASSERT_TRUE(w->Write(0, std::string(4096, 'q')));
  EXPECT_EQ(store_->buffered_bytes(), 4096u);
  char buf[4096];
  ASSERT_TRUE(w->Read(0, 4096, buf));
  EXPECT_EQ(std::string(buf, 4096), std::string(4096, 'q'));
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  EXPECT_TRUE(fake_->Has(BlockKey("vol", 5, 0, 4096)));
}

TEST_F(SliceWriterTest, EmptySliceFinishesWithoutObjects) {
  Make();
  auto w = store_->NewSliceWriter(6);
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(fake_->puts.load(), 0);
}

TEST_F(SliceWriterTest, PermanentPutFailureFailsFinishAndLeavesNothing) {
  Make();
  fake_->put_errno = ENOSPC;
  auto w = store_->NewSliceWriter(7);
  ASSERT_TRUE(w->Write(0, std::string(2 * kBlock + 10, 'x')));
  Status st = w->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ENOSPC);
  EXPECT_NE(st.message().find("vol/chunks/"), std::string::npos) << st.message();
  EXPECT_EQ(fake_->Count(), 0u);
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  EXPECT_EQ(store_->stats().uploads_in_flight, 0u);
  EXPECT_FALSE(w->Finish().ok());
  // ENOSPC is not retried.
  EXPECT_LE(fake_->puts.load(), 3);
}

TEST_F(SliceWriterTest, PartialFailureDeletesTheBlocksThatMadeIt) {
  Make();
  fake_->put_errno = EIO;
  fake_->put_fail_count = 1;  // the first block's put fails; later blocks succeed
  auto w = store_->NewSliceWriter(8);
  ASSERT_TRUE(w->Write(0, std::string(kBlock, 'x')));
  ASSERT_TRUE(Eventually([&] { return store_->stats().upload_failures == 1; }));
  ASSERT_TRUE(w->Write(kBlock, std::string(kBlock + 5, 'y')));
  Status st = w->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find(Key(8, 0, kBlock)), std::string::npos) << st.message();
  EXPECT_EQ(fake_->Count(), 0u);
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
}

// The store's client is the one layer that retries a put (within the request's budget,
// common/io_budget.h); the cached store does not multiply its attempts.
TEST_F(SliceWriterTest, AFailedPutIsNotRetriedAgainAboveTheStore) {
  Make();
  fake_->put_errno = EIO;
  fake_->put_fail_count = 1;
  auto w = store_->NewSliceWriter(9);
  std::string data = RandomBytes(kBlock, 9);
  ASSERT_TRUE(w->Write(0, data));
  Status st = w->Finish();
  EXPECT_EQ(st.code(), EIO);
  EXPECT_EQ(fake_->puts.load(), 1);
  EXPECT_EQ(store_->stats().puts, 1u);
  EXPECT_EQ(store_->stats().upload_failures, 1u);
}

TEST_F(SliceWriterTest, AbortDeletesUploadedBlocks) {
  Make();
  auto w = store_->NewSliceWriter(10);
  ASSERT_TRUE(w->Write(0, std::string(2 * kBlock + 10, 'x')));
  ASSERT_TRUE(Eventually([&] { return fake_->Count() == 2; }));
  w->Abort();
  EXPECT_EQ(fake_->Count(), 0u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  EXPECT_EQ(store_->stats().cache_blocks, 0u);
  EXPECT_FALSE(w->Write(2 * kBlock + 10, "x"));
  char c;
  EXPECT_FALSE(w->Read(0, 1, &c));
  EXPECT_EQ(w->Finish().code(), ECANCELED);
  w->Abort();  // idempotent
}

TEST_F(SliceWriterTest, AbortAfterFinishDeletesTheSlice) {
  Make();
  auto w = store_->NewSliceWriter(11);
  ASSERT_TRUE(w->Write(0, std::string(kBlock + 10, 'x')));
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(fake_->Count(), 2u);
  w->Abort();  // e.g. the metadata commit failed
  EXPECT_EQ(fake_->Count(), 0u);
}

TEST_F(SliceWriterTest, DestructorWithoutFinishAborts) {
  Make();
  fake_->put_delay_ms = 50;
  {
    auto w = store_->NewSliceWriter(12);
    ASSERT_TRUE(w->Write(0, std::string(3 * kBlock + 10, 'x')));
  }
  EXPECT_EQ(fake_->Count(), 0u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  EXPECT_EQ(store_->stats().uploads_in_flight, 0u);
  // After a successful Finish the destructor keeps the data.
  {
    auto w = store_->NewSliceWriter(13);
    ASSERT_TRUE(w->Write(0, "hello"));
    ASSERT_TRUE(w->Finish().ok());
  }
  EXPECT_EQ(fake_->Count(), 1u);
}

TEST_F(SliceWriterTest, UploadedBlocksAreServedFromTheCacheWhenAsked) {
  Make(kBlock, 4, /*cache_writes=*/true);
  auto w = store_->NewSliceWriter(14);
  std::string data = RandomBytes(2 * kBlock + 77, 14);
  ASSERT_TRUE(w->Write(0, data));
  ASSERT_TRUE(w->Finish().ok());
  std::string out(data.size(), '\0');
  const uint32_t size = static_cast<uint32_t>(data.size());
  ASSERT_TRUE(store_->ReadSlice(14, size, 0, size, out.data()).ok());
  EXPECT_TRUE(out == data);
  EXPECT_EQ(fake_->gets.load(), 0);
}

TEST_F(SliceWriterTest, UploadedBlocksSkipTheCacheByDefault) {
  Make();
  auto w = store_->NewSliceWriter(16);
  std::string data = RandomBytes(kBlock, 16);
  ASSERT_TRUE(w->Write(0, data));
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(store_->cache()->stats().blocks, 0u);
  std::string out(data.size(), '\0');
  ASSERT_TRUE(store_->ReadSlice(16, kBlock, 0, kBlock, out.data()).ok());
  EXPECT_TRUE(out == data);
  EXPECT_EQ(fake_->gets.load(), 1);
}

TEST_F(SliceWriterTest, ReadSeesBlocksWhileUploading) {
  Make();
  fake_->HoldPuts(true);
  auto w = store_->NewSliceWriter(15);
  std::string data = RandomBytes(kBlock + 10, 15);
  ASSERT_TRUE(w->Write(0, data));
  std::string out(data.size(), '\0');
  ASSERT_TRUE(w->Read(0, static_cast<uint32_t>(data.size()), out.data()));
  EXPECT_TRUE(out == data);
  fake_->HoldPuts(false);
  ASSERT_TRUE(w->Finish().ok());
}

TEST_F(SliceWriterTest, FullChunkRoundTripsWithOneMegabyteBlocks) {
  Make(1 << 20, 4);
  const uint32_t size = static_cast<uint32_t>(kChunkSize);
  std::string data = RandomBytes(size, 64);
  auto w = store_->NewSliceWriter(16);
  // Irregular write sizes so that writes straddle block boundaries.
  std::mt19937 rng(16);
  uint32_t off = 0;
  while (off < size) {
    uint32_t n = std::min<uint32_t>(size - off, 1 + rng() % (300 << 10));
    ASSERT_TRUE(w->Write(off, std::string_view(data).substr(off, n)));
    off += n;
  }
  EXPECT_FALSE(w->Write(size, "x"));  // the chunk is full
  ASSERT_TRUE(w->Finish().ok());
  w.reset();
  EXPECT_EQ(fake_->Count(), 64u);
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  store_->cache()->Clear();
  std::string out(size, '\0');
  ASSERT_TRUE(store_->ReadSlice(16, size, 0, size, out.data()).ok());
  EXPECT_TRUE(out == data);
  for (int i = 0; i < 50; ++i) {
    uint32_t o = rng() % size;
    uint32_t n = std::min<uint32_t>(size - o, rng() % (3 << 20));
    std::string piece(n, '\0');
    ASSERT_TRUE(store_->ReadSlice(16, size, o, n, piece.data()).ok());
    ASSERT_TRUE(piece == data.substr(o, n)) << o << "+" << n;
  }
  ASSERT_TRUE(store_->DeleteSlice(16, size).ok());
  EXPECT_EQ(fake_->Count(), 0u);
}

TEST_F(SliceWriterTest, ManyWritersInParallel) {
  Make(16 << 10, 4, false, 64 << 10);
  std::vector<std::thread> threads;
  std::vector<std::string> datas(8);
  for (int t = 0; t < 8; ++t) {
    datas[t] = RandomBytes(100000 + t * 777, 100 + t);
    threads.emplace_back([&, t] {
      auto w = store_->NewSliceWriter(100 + t);
      const std::string& d = datas[t];
      for (uint32_t off = 0; off < d.size(); off += 3000) {
        ASSERT_TRUE(w->Write(off, std::string_view(d).substr(off, 3000)));
        store_->WaitForBufferRoom();
      }
      ASSERT_TRUE(w->Finish().ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->buffered_bytes(), 0u);
  store_->cache()->Clear();
  for (int t = 0; t < 8; ++t) {
    std::string out(datas[t].size(), '\0');
    const uint32_t size = static_cast<uint32_t>(out.size());
    ASSERT_TRUE(store_->ReadSlice(100 + t, size, 0, size, out.data()).ok());
    EXPECT_TRUE(out == datas[t]) << t;
  }
}

}  // namespace
}  // namespace tierfs
