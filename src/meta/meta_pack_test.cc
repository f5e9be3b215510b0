// Small-file packing's metadata (meta_pack.cc), against every engine.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "meta/meta_test_fixture.h"
#include "meta/slice_map.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

// A file of one small slice committed while staged, flagged as packable (as FileWriter does).
uint64_t StagedSmallFile(Meta* m, const std::string& name, uint32_t size, Ino* ino_out) {
  auto made = m->Mknod(Ctx::Root(), kRootIno, name, S_IFREG | 0644, 0);
  EXPECT_TRUE(made.ok());
  Ino f = made->first;
  uint64_t id = *m->NewSliceId();
  SliceRecord rec{0, 0, id, size, 0, size};
  rec.flags = kRecordMayBePacked;
  EXPECT_TRUE(m->WriteSlice(f, 0, rec, size, 1, nullptr, /*staged=*/true).ok());
  *ino_out = f;
  return id;
}

TYPED_TEST(MetaTest, PackedSlicesAreLocatedAndReleasedWithTheirPack) {
  Ino a, b, c;
  uint64_t ia = StagedSmallFile(this->m_.get(), "a", 100, &a);
  uint64_t ib = StagedSmallFile(this->m_.get(), "b", 200, &b);
  uint64_t ic = StagedSmallFile(this->m_.get(), "c", 300, &c);
  // Before its pack is recorded a file reads from its own block.
  auto recs = this->m_->ReadChunk(a, 0);
  ASSERT_TRUE(recs.ok());
  EXPECT_EQ((*recs)[0].flags, kRecordMayBePacked);
  EXPECT_EQ((*recs)[0].pack, 0u);
  // c is deleted before the pack lands: it is left out.
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "c").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  uint64_t pack = *this->m_->NewSliceId();
  auto recorded = this->m_->RecordPack(pack, 600, {{ia, 0, 100}, {ib, 100, 200}, {ic, 300, 300}});
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(*recorded, (std::vector<uint64_t>{ia, ib}));
  // Located, no longer staged, and the location travels into the slice map.
  recs = this->m_->ReadChunk(b, 0);
  EXPECT_EQ((*recs)[0].pack, pack);
  EXPECT_EQ((*recs)[0].pack_len, 600u);
  EXPECT_EQ((*recs)[0].pack_off, 100u);
  auto seg = BuildSliceMap(*recs);
  EXPECT_EQ(seg[0].pack, pack);
  EXPECT_EQ(seg[0].pack_off, 100u);
  EXPECT_FALSE(this->m_->StagedBy(ib)->has_value());
  auto packs = this->m_->ListPacks();
  ASSERT_EQ(packs->size(), 1u);
  EXPECT_EQ((*packs)[0].live, 300u);
  EXPECT_EQ((*packs)[0].members.size(), 2u);
  // A copy shares the packed slice and its flag: the pack lives while either holds it.
  Ino d = this->File("d");
  ASSERT_EQ(*this->m_->CopyFileRange(this->root_, b, 0, d, 0, 200), 200u);
  EXPECT_EQ(BuildSliceMap(*this->m_->ReadChunk(d, 0))[0].pack, pack);
  std::vector<std::pair<uint64_t, uint32_t>> dead_packs;
  std::vector<uint64_t> dead_slices;
  this->m_->SetSliceDeleter([&](uint64_t id, uint32_t) {
    dead_slices.push_back(id);
    return Status::OK();
  });
  this->m_->SetPackDeleter([&](uint64_t p, uint32_t len) {
    dead_packs.emplace_back(p, len);
    return Status::OK();
  });
  for (const char* name : {"a", "b"}) ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, name).ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(dead_packs.empty());
  EXPECT_EQ(dead_slices, (std::vector<uint64_t>{ic}));  // c had no pack: its own block goes
  EXPECT_EQ((*this->m_->ListPacks())[0].live, 200u);
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "d").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_EQ(dead_packs, (std::vector<std::pair<uint64_t, uint32_t>>{{pack, 600}}));
  EXPECT_TRUE(this->m_->ListPacks()->empty());
  EXPECT_TRUE(this->m_->PendingPacks()->empty());
}

TYPED_TEST(MetaTest, APackWithNoLiveMemberIsDeadAtOnce) {
  uint64_t pack = *this->m_->NewSliceId();
  auto recorded = this->m_->RecordPack(pack, 50, {{12345, 0, 50}});  // never committed
  ASSERT_TRUE(recorded.ok());
  EXPECT_TRUE(recorded->empty());
  EXPECT_EQ(*this->m_->PendingPacks(), (std::vector<std::pair<uint64_t, uint32_t>>{{pack, 50}}));
}

TYPED_TEST(MetaTest, MovingPackMembersKeepsReleasedOnesOutAndTheOldPackUntilItsGrace) {
  Ino a, b;
  uint64_t ia = StagedSmallFile(this->m_.get(), "a", 10, &a);
  uint64_t ib = StagedSmallFile(this->m_.get(), "b", 20, &b);
  uint64_t old_pack = *this->m_->NewSliceId();
  ASSERT_TRUE(this->m_->RecordPack(old_pack, 1000, {{ia, 0, 10}, {ib, 500, 20}}).ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, kRootIno, "a").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  uint64_t fresh = *this->m_->NewSliceId();
  int64_t later = NowNanos() + 3'600'000'000'000;
  // a was released meanwhile: only b moves.
  auto moved = this->m_->MovePackMembers(old_pack, 1000, fresh, 30, {{ia, 0, 10}, {ib, 10, 20}}, later);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1u);
  auto recs = this->m_->ReadChunk(b, 0);
  EXPECT_EQ((*recs)[0].pack, fresh);
  EXPECT_EQ((*recs)[0].pack_off, 10u);
  EXPECT_EQ(*this->m_->PendingPacks(), (std::vector<std::pair<uint64_t, uint32_t>>{{old_pack, 1000}}));
  std::vector<uint64_t> dead;
  this->m_->SetPackDeleter([&](uint64_t p, uint32_t) {
    dead.push_back(p);
    return Status::OK();
  });
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(dead.empty());  // its grace has not passed
  auto packs = this->m_->ListPacks();
  ASSERT_EQ(packs->size(), 1u);
  EXPECT_EQ((*packs)[0].pack, fresh);
}

}  // namespace
}  // namespace tierfs
