// Compaction's compare-and-swap of a chunk's records, against every engine.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "meta/meta_test_fixture.h"
#include "meta/slice_map.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

SliceRecord Fresh(uint32_t pos, uint64_t id, uint32_t len) { return SliceRecord{0, pos, id, len, 0, len}; }

TYPED_TEST(MetaTest, CompactSwapReplacesTheRecordsAndReleasesTheOldSlicesLater) {
  Ino f = this->File("f");
  uint64_t a, b, c;
  this->WriteSlice(f, 0, 0, 8192, &a);
  this->WriteSlice(f, 0, 4096, 8192, &b);  // shadows half of a
  this->WriteSlice(f, 0, 0, 1000, &c);
  auto before = BuildSliceMap(*this->m_->ReadChunk(f, 0));
  auto cr = this->m_->ReadChunkRecords(f, 0);
  ASSERT_TRUE(cr.ok()) << cr.status().ToString();
  ASSERT_EQ(cr->records.size(), 3u);
  EXPECT_FALSE(cr->masked);
  EXPECT_EQ(cr->length, 12288u);
  uint64_t fresh_id = *this->m_->NewSliceId();
  int64_t later = NowNanos() + 3'600'000'000'000;
  ASSERT_TRUE(this->m_->SwapChunkRecords(f, 0, cr->records, {Fresh(0, fresh_id, 12288)}, later).ok());
  auto after = this->m_->ReadChunk(f, 0);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, fresh_id);
  EXPECT_EQ(BuildSliceMap(*after).size(), 1u);
  EXPECT_EQ(before.size(), 3u);
  EXPECT_EQ(this->m_->GetAttr(f)->length, 12288u);
  // The old slices go, but not before `later`: readers may hold the old map.
  std::vector<uint64_t> deleted;
  this->m_->StartBackground([&](uint64_t id, uint32_t) {
    deleted.push_back(id);
    return Status::OK();
  });
  this->m_->StopBackground();
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(deleted.empty());
  // Deleting the file releases the new slice at once.
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "f").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_EQ(deleted, std::vector<uint64_t>{fresh_id});
}

TYPED_TEST(MetaTest, CompactKeepsAWriteCommittedMeanwhile) {
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 8192);
  this->WriteSlice(f, 0, 100, 100);
  auto cr = this->m_->ReadChunkRecords(f, 0);
  ASSERT_TRUE(cr.ok());
  uint64_t late;
  this->WriteSlice(f, 0, 50, 10, &late);  // after the read, before the swap
  uint64_t fresh_id = *this->m_->NewSliceId();
  ASSERT_TRUE(this->m_->SwapChunkRecords(f, 0, cr->records, {Fresh(0, fresh_id, 8192)}, 0).ok());
  auto map = BuildSliceMap(*this->m_->ReadChunk(f, 0));
  ASSERT_EQ(map.size(), 3u);
  EXPECT_EQ(map[0].id, fresh_id);
  EXPECT_EQ(map[1].id, late);
  EXPECT_EQ(map[1].pos, 50u);
  EXPECT_EQ(map[2].id, fresh_id);
  EXPECT_EQ(map[2].off, 60u);
}

TYPED_TEST(MetaTest, CompactRefusesAChangedChunk) {
  Ino f = this->File("f");
  this->WriteSlice(f, 0, 0, 8192);
  this->WriteSlice(f, 0, 100, 100);
  auto cr = this->m_->ReadChunkRecords(f, 0);
  ASSERT_TRUE(cr.ok());
  uint64_t fresh_id = *this->m_->NewSliceId();
  // A record the compactor read has changed.
  auto changed = cr->records;
  changed[1].len = 99;
  EXPECT_EQ(this->m_->SwapChunkRecords(f, 0, changed, {Fresh(0, fresh_id, 8192)}, 0).code(), EAGAIN);
  // A truncation waits to be applied: the new records would escape it.
  ASSERT_TRUE(this->m_->SetAttr(this->root_, f, kSetSize, [] {
                                  Attr a;
                                  a.length = 10;
                                  return a;
                                }())
                  .ok());
  auto masked = this->m_->ReadChunkRecords(f, 0);
  if (masked->masked) {
    EXPECT_EQ(this->m_->SwapChunkRecords(f, 0, masked->records, {Fresh(0, fresh_id, 10)}, 0).code(), EAGAIN);
  }
  // More records than it replaces: refused outright.
  EXPECT_EQ(this->m_->SwapChunkRecords(f, 0, {cr->records[0]}, {Fresh(0, 1, 1), Fresh(1, 2, 1)}, 0).code(), EINVAL);
  // Nothing changed by the refusals.
  EXPECT_EQ(this->m_->ReadChunkRecords(f, 0)->records.size(), masked->records.size());
}

}  // namespace
}  // namespace tierfs
