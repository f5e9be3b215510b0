// gc over the in-memory engine and store: leaked objects are found, young ones spared,
// pending deletions carried out, and nothing referenced is ever deleted.
#include "tools/gc.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>

#include "chunk/block_key.h"
#include "common/clock.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/mem_volume_for_test.h"

namespace tierfs {
namespace {

class GcTest : public testing::MemVolumeTest {
 protected:

  // A file whose one slice of `size` bytes is committed and whose blocks are stored.
  uint64_t CommittedFile(const std::string& name, uint32_t size) {
    auto f = meta_->Mknod(Ctx::Root(), kRootIno, name, S_IFREG | 0644, 0);
    EXPECT_TRUE(f.ok());
    uint64_t id = *meta_->NewSliceId();
    PutBlocks(id, size);
    SliceRecord rec;
    rec.id = id;
    rec.size = rec.len = size;
    EXPECT_TRUE(meta_->WriteSlice(f->first, 0, rec, size, 1).ok());
    return id;
  }
  void PutBlocks(uint64_t id, uint32_t size) {
    for (uint32_t i = 0; i < BlockCount(size, kBlock); ++i) {
      uint32_t len = BlockLength(size, kBlock, i);
      ASSERT_TRUE(store_->Put(BlockKey(vol_, id, i, len), std::string(len, 'b')).ok());
    }
  }
  bool Has(uint64_t id, uint32_t index, uint32_t len) { return store_->Head(BlockKey(vol_, id, index, len)).ok(); }

};

TEST_F(GcTest, FindsAndDeletesLeakedObjectsOnly) {
  uint64_t kept = CommittedFile("kept", 3 * kBlock + 5);
  uint64_t leaked = 999999;  // uploaded, never committed
  PutBlocks(leaked, 2 * kBlock);
  ASSERT_TRUE(store_->Put(vol_ + "/chunks/zz/not-a-block", "x").ok());

  GcOptions opts;
  opts.min_age_ns = 0;
  auto r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->objects, 7u);
  EXPECT_EQ(r->referenced, 4u);
  EXPECT_EQ(r->leaked, 2u);
  EXPECT_EQ(r->foreign, 1u);
  EXPECT_EQ(r->deleted, 0u);
  EXPECT_TRUE(Has(leaked, 0, kBlock));  // reporting deletes nothing

  opts.delete_garbage = true;
  r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->deleted, 2u);
  EXPECT_FALSE(Has(leaked, 0, kBlock));
  EXPECT_FALSE(Has(leaked, 1, kBlock));
  for (uint32_t i = 0; i < 3; ++i) EXPECT_TRUE(Has(kept, i, kBlock));
  EXPECT_TRUE(Has(kept, 3, 5));
}

TEST_F(GcTest, SparesYoungObjects) {
  PutBlocks(424242, kBlock);
  GcOptions opts;
  opts.delete_garbage = true;  // default safety window: one hour
  auto r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->young, 1u);
  EXPECT_EQ(r->leaked, 0u);
  EXPECT_TRUE(Has(424242, 0, kBlock));
}

TEST_F(GcTest, CarriesOutPendingDeletions) {
  uint64_t id = CommittedFile("gone", 2 * kBlock);
  ASSERT_TRUE(meta_->Unlink(Ctx::Root(), kRootIno, "gone").ok());
  GcOptions opts;
  opts.min_age_ns = 0;
  auto r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok());
  // The unlinked file's records are dropped by cleanup; until then its slice is in use.
  EXPECT_EQ(r->leaked, 0u);
  opts.delete_garbage = true;
  r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(Has(id, 0, kBlock));
  EXPECT_FALSE(Has(id, 1, kBlock));
  EXPECT_TRUE(meta_->PendingSlices()->empty());
}

// What compaction replaced stays for --compact-grace: gc --delete keeps it and says how much
// and until when, instead of counting it as an ordinary pending deletion.
TEST_F(GcTest, ReportsWhatTheCompactionGraceHolds) {
  uint64_t id = CommittedFile("rewritten", 2 * kBlock);
  auto f = meta_->Lookup(Ctx::Root(), kRootIno, "rewritten");
  ASSERT_TRUE(f.ok());
  auto old = meta_->ReadChunkRecords(f->first, 0);
  ASSERT_TRUE(old.ok());
  const int64_t until = NowNanos() + 600LL * 1000000000;
  ASSERT_TRUE(meta_->SwapChunkRecords(f->first, 0, old->records, {}, until).ok());
  GcOptions opts;
  opts.min_age_ns = 0;
  opts.delete_garbage = true;
  auto r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pending_slices, 1u);
  EXPECT_EQ(r->held_slices, 1u);
  EXPECT_EQ(r->held_bytes, 2u * kBlock);
  EXPECT_EQ(r->held_until_ns, until);
  EXPECT_TRUE(Has(id, 0, kBlock));  // still there for readers of the old layout
  EXPECT_TRUE(Has(id, 1, kBlock));
}

TEST_F(GcTest, SharedSlicesSurviveWhileReferenced) {
  uint64_t id = CommittedFile("src", kBlock);
  auto dst = meta_->Mknod(Ctx::Root(), kRootIno, "dst", S_IFREG | 0644, 0);
  ASSERT_TRUE(dst.ok());
  auto src = meta_->Lookup(Ctx::Root(), kRootIno, "src");
  ASSERT_TRUE(meta_->CopyFileRange(Ctx::Root(), src->first, 0, dst->first, 0, kBlock).ok());
  ASSERT_TRUE(meta_->Unlink(Ctx::Root(), kRootIno, "src").ok());
  GcOptions opts;
  opts.min_age_ns = 0;
  opts.delete_garbage = true;
  auto r = CollectGarbage(meta_.get(), store_.get(), opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->deleted, 0u);
  EXPECT_TRUE(Has(id, 0, kBlock));
}

}  // namespace
}  // namespace tierfs
