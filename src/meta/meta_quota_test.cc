// Exact quotas (quota_tx.h, meta_quota.cc), against every engine.
#include <gtest/gtest.h>

#include <thread>

#include "common/clock.h"
#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

Quota Get(Meta* m, QuotaKind kind, uint64_t id) {
  auto q = m->GetQuota(kind, id);
  EXPECT_TRUE(q.ok() && q->has_value());
  return q.ok() && q->has_value() ? **q : Quota{};
}

void ExpectCounted(Meta* m, QuotaKind kind, uint64_t id) {
  Quota q = Get(m, kind, id);
  auto c = m->CountQuotaUsage(kind, id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(q.used_bytes, c->used_bytes) << "kind " << static_cast<char>(kind) << " id " << id;
  EXPECT_EQ(q.used_inodes, c->used_inodes) << "kind " << static_cast<char>(kind) << " id " << id;
}

TYPED_TEST(MetaTest, DirectoryQuotaLimitsBytesAndInodesExactly) {
  Ino d = this->Dir("d");
  Ino sub = this->Dir("sub", d);
  this->File("old", sub);
  // Set on a tree that has content: its usage is counted.
  bool exact = false;
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, d, 3 * 4096, 4, &exact).ok());
  EXPECT_TRUE(exact);
  Quota q = Get(this->m_.get(), QuotaKind::kDir, d);
  EXPECT_EQ(q.used_inodes, 2);
  EXPECT_EQ(q.used_bytes, 0);
  Ino a = this->File("a", sub);
  Ino b = this->File("b", d);
  EXPECT_EQ(this->Err(this->m_->Mknod(this->root_, sub, "c", S_IFREG | 0644, 0)), EDQUOT);
  EXPECT_EQ(this->Err(this->m_->Mkdir(this->root_, d, "e", 0755)), EDQUOT);
  // Outside the tree: no limit.
  this->File("free");
  // Bytes count by 4 KiB: 8192 + 4096 fit, one byte more does not, and the failed commit
  // changed nothing.
  this->WriteSlice(a, 0, 0, 8192);
  this->WriteSlice(b, 0, 0, 100);
  auto id = this->m_->NewSliceId();
  SliceRecord rec;
  rec.id = *id;
  rec.size = rec.len = 5000;
  EXPECT_EQ(this->Err(this->m_->WriteSlice(b, 0, rec, 5000, 1)), EDQUOT);
  EXPECT_EQ(this->m_->GetAttr(b)->length, 100u);
  Attr grow;
  grow.length = 1 << 20;
  EXPECT_EQ(this->Err(this->m_->SetAttr(this->root_, a, kSetSize, grow)), EDQUOT);
  EXPECT_EQ(this->Err(this->m_->Fallocate(this->root_, b, 0, 0, 1 << 20)), EDQUOT);
  q = Get(this->m_.get(), QuotaKind::kDir, d);
  EXPECT_EQ(q.used_bytes, 3 * 4096);
  EXPECT_EQ(q.used_inodes, 4);
  ExpectCounted(this->m_.get(), QuotaKind::kDir, d);
  // Freeing makes room; shrinking frees bytes.
  grow.length = 0;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, a, kSetSize, grow).ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, d, "b").ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, d).used_bytes, 0);
  this->File("c", sub);
  ExpectCounted(this->m_.get(), QuotaKind::kDir, d);
  // statfs inside the tree shows the quota; outside it, the volume.
  auto fs = this->m_->GetStatFs(sub);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->capacity_bytes, 3u * 4096);
  EXPECT_EQ(fs->max_inodes, 4u);
  EXPECT_EQ(fs->inodes, 4u);
  EXPECT_EQ(this->m_->GetStatFs(kRootIno)->capacity_bytes, kVolumeCapacity);
  // Removing the quota lifts the limit.
  ASSERT_TRUE(this->m_->DeleteQuota(QuotaKind::kDir, d).ok());
  this->File("more", sub);
  EXPECT_EQ(this->Err(this->m_->DeleteQuota(QuotaKind::kDir, d)), ENOENT);
}

TYPED_TEST(MetaTest, RenamesMoveUsageBetweenQuotaTrees) {
  Ino a = this->Dir("a");
  Ino b = this->Dir("b");
  Ino inner = this->Dir("inner", a);
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, a, 0, 0).ok());
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, inner, 0, 0).ok());
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, b, 40960, 0).ok());
  Ino f = this->File("f", inner);
  this->WriteSlice(f, 0, 0, 10000);
  Ino tree = this->Dir("tree", inner);
  for (int i = 0; i < 3; ++i) this->WriteSlice(this->File("t" + std::to_string(i), tree), 0, 0, 4096);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, a).used_inodes, 6);
  // A file moves from a/inner to b, in the same transaction as its usage.
  ASSERT_TRUE(this->m_->Rename(this->root_, inner, "f", b, "f", 0).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, b).used_bytes, 12288);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, a).used_inodes, 5);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, inner).used_bytes, 3 * 4096);
  // A tree moves with everything below it; within a's quota (inner -> a) only inner's changes.
  ASSERT_TRUE(this->m_->Rename(this->root_, inner, "tree", a, "tree", 0).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, inner).used_inodes, 0);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, a).used_inodes, 5);
  // A tree that does not fit is refused, and nothing moved.
  Ino big = this->File("big", a);
  this->WriteSlice(big, 0, 0, 40000);
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "big", b, "big", 0)), EDQUOT);
  EXPECT_EQ(this->m_->Lookup(this->root_, a, "big")->first, big);
  ASSERT_TRUE(this->m_->Rename(this->root_, a, "tree", b, "tree", 0).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, b).used_bytes, 12288 + 3 * 4096);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, b).used_inodes, 5);
  // Replacing a file releases the replaced one.
  Ino g = this->File("g", b);
  this->WriteSlice(g, 0, 0, 4096);
  ASSERT_TRUE(this->m_->Rename(this->root_, b, "g", b, "f", 0).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, b).used_bytes, 4096 + 3 * 4096);
  // Exchange swaps the usage of both sides, checked: big does not fit in b, small does.
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "big", b, "f", kRenameExchange)), EDQUOT);
  Ino small = this->File("small", a);
  this->WriteSlice(small, 0, 0, 8192);
  ASSERT_TRUE(this->m_->Rename(this->root_, a, "small", b, "f", kRenameExchange).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, b).used_bytes, 8192 + 3 * 4096);
  EXPECT_EQ(this->m_->Lookup(this->root_, b, "f")->first, small);
  for (Ino q : {a, inner, b}) ExpectCounted(this->m_.get(), QuotaKind::kDir, q);
  // Hard links stay inside one set of directory quotas: not into b, nor out to the root;
  // within a's tree they may.
  EXPECT_EQ(this->Err(this->m_->Link(this->root_, big, b, "link")), EXDEV);
  EXPECT_EQ(this->Err(this->m_->Link(this->root_, big, kRootIno, "link")), EXDEV);
  ASSERT_TRUE(this->m_->Link(this->root_, big, a, "link").ok());
  // A file with two links may not change quotas by rename either.
  EXPECT_EQ(this->Err(this->m_->Rename(this->root_, a, "link", b, "link", 0)), EXDEV);
  for (Ino q : {a, inner, b}) ExpectCounted(this->m_.get(), QuotaKind::kDir, q);
}

TYPED_TEST(MetaTest, UserAndGroupQuotasFollowOwnership) {
  Ctx alice;
  alice.uid = 1000;
  alice.gid = 100;
  Ino pub = this->Dir("pub", kRootIno, 0777);
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kUser, 1000, 8192, 3).ok());
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kGroup, 100, 0, 10).ok());
  auto f = this->m_->Mknod(alice, pub, "f", S_IFREG | 0644, 0);
  ASSERT_TRUE(f.ok());
  this->WriteSlice(f->first, 0, 0, 8192);
  ASSERT_TRUE(this->m_->Mkdir(alice, pub, "d", 0755).ok());
  ASSERT_TRUE(this->m_->Symlink(alice, pub, "l", "f").ok());
  EXPECT_EQ(this->Err(this->m_->Mknod(alice, pub, "g", S_IFREG | 0644, 0)), EDQUOT);
  this->File("root-file", pub);  // root's files are not alice's
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kUser, 1000).used_inodes, 3);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kGroup, 100).used_inodes, 3);
  // chown moves usage between users, checked against the new owner.
  Attr own;
  own.uid = 2000;
  ASSERT_TRUE(this->m_->SetAttr(this->root_, f->first, kSetUid, own).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kUser, 1000).used_inodes, 2);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kUser, 1000).used_bytes, 0);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kGroup, 100).used_bytes, 8192);
  Ino big = this->File("big", pub);
  this->WriteSlice(big, 0, 0, 10000);
  own.uid = 1000;
  EXPECT_EQ(this->Err(this->m_->SetAttr(this->root_, big, kSetUid, own)), EDQUOT);
  for (auto [k, id] : {std::pair{QuotaKind::kUser, 1000}, std::pair{QuotaKind::kGroup, 100}}) {
    ExpectCounted(this->m_.get(), k, static_cast<uint64_t>(id));
  }
  ASSERT_TRUE(this->m_->Unlink(alice, pub, "l").ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kUser, 1000).used_inodes, 1);
  auto list = this->m_->ListQuotas();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
}

TYPED_TEST(MetaTest, TheVolumeLimitIsTheRootQuotaAndTheTrashCountsInNone) {
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, kRootIno, 1 << 20, 0).ok());
  EXPECT_EQ(this->m_->GetStatFs(kRootIno)->capacity_bytes, 1u << 20);
  Ino d = this->Dir("d");
  EXPECT_EQ(this->m_->GetStatFs(d)->capacity_bytes, 1u << 20);
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, d, 100000, 0).ok());
  Ino f = this->File("f", d);
  this->WriteSlice(f, 0, 0, 65536);
  ASSERT_TRUE(Meta::UpdateFormat(this->m_->engine(), [](FormatRecord& r) {
                r.trash_days = 1;
                return Status::OK();
              }).ok());
  ASSERT_TRUE(this->m_->ExpireTrash(NowNanos()).ok());
  ASSERT_TRUE(this->m_->Unlink(this->root_, d, "f").ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, d).used_bytes, 0);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, kRootIno).used_bytes, 0);
  ExpectCounted(this->m_.get(), QuotaKind::kDir, kRootIno);
  ASSERT_TRUE(this->m_->RestoreFromTrash(this->root_, Meta::TrashHourName(NowNanos()),
                                         std::to_string(d) + "-" + std::to_string(f) + "-f")
                  .ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, d).used_bytes, 65536);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, kRootIno).used_inodes, 2);
  ExpectCounted(this->m_.get(), QuotaKind::kDir, d);
  EXPECT_EQ(this->Err(this->m_->SetQuota(QuotaKind::kDir, kTrashIno, 1, 1)), EPERM);
  // Repair sets the usage.
  ASSERT_TRUE(this->m_->SetQuotaUsage(QuotaKind::kDir, d, 1, 1).ok());
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, d).used_bytes, 1);
}

// Many writers on two clients at once never take a quota past its limit.
TYPED_TEST(MetaTest, ConcurrentClientsNeverOvershootAQuota) {
  Ino d = this->Dir("d", kRootIno, 0777);
  constexpr int kLimit = 40;
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kDir, d, 0, kLimit).ok());
  auto other = this->Open(false);
  std::atomic<int> made{0}, refused{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 2; ++c) {
    Meta* m = c == 0 ? this->m_.get() : other.get();
    for (int th = 0; th < 3; ++th) {
      threads.emplace_back([&, m, c, th] {
        for (int i = 0; i < 20; ++i) {
          auto r = m->Mknod(Ctx::Root(), d, "f" + std::to_string(c) + "_" + std::to_string(th) + "_" + std::to_string(i),
                            S_IFREG | 0644, 0);
          if (r.ok()) made++;
          else if (r.status().code() == EDQUOT) refused++;
          else failed++;
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(made.load(), kLimit);
  EXPECT_EQ(refused.load(), 120 - kLimit);
  EXPECT_EQ(Get(this->m_.get(), QuotaKind::kDir, d).used_inodes, kLimit);
  EXPECT_EQ(this->m_->Readdir(this->root_, d, false)->size(), static_cast<size_t>(kLimit));
}

}  // namespace
}  // namespace tierfs
