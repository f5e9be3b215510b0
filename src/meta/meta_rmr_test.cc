// Batched tree removal (meta_rmr.cc) and clones (meta_clone.cc), against every engine.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

TYPED_TEST(MetaTest, RemoveContentsEmptiesATreeInStepsAndKeepsUsageExact) {
  auto before = this->m_->GetStatFs();
  ASSERT_TRUE(before.ok());
  Ino top = this->Dir("top");
  Ino kept = this->File("kept");
  this->WriteSlice(kept, 0, 0, 5000);
  uint64_t made = 0;
  for (int d = 0; d < 3; ++d) {
    Ino sub = this->Dir("d" + std::to_string(d), top);
    Ino deeper = this->Dir("deeper", sub);
    for (int i = 0; i < 300; ++i) {
      Ino f = this->File("f" + std::to_string(i), i % 2 ? sub : deeper);
      if (i % 50 == 0) this->WriteSlice(f, 0, 0, 10000);
      made++;
    }
  }
  // A second name of a file in the tree, outside it: the file stays.
  ASSERT_TRUE(this->m_->Link(this->root_, this->m_->Lookup(this->root_, this->m_->Lookup(this->root_, top, "d0")->first,
                                                           "f1")->first,
                             kRootIno, "outside")
                  .ok());
  uint64_t files = 0, dirs = 0;
  int calls = 0;
  for (bool done = false; !done; ++calls) {
    auto p = this->m_->RemoveContents(this->root_, top, 400);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    files += p->files;
    dirs += p->dirs;
    done = p->done;
    ASSERT_LT(calls, 100);
  }
  EXPECT_GT(calls, 2);  // the budget splits the work
  EXPECT_EQ(files, made);
  EXPECT_EQ(dirs, 6u);
  EXPECT_TRUE(this->m_->Readdir(this->root_, top, false)->empty());
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "top").ok());
  auto outside = this->m_->Lookup(this->root_, kRootIno, "outside");
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ(outside->second.nlink, 1u);
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  auto after = this->m_->GetStatFs();
  EXPECT_EQ(after->inodes, before->inodes + 2);  // kept and outside
  EXPECT_EQ(after->used_bytes, before->used_bytes + 4096 * 2);
}

TYPED_TEST(MetaTest, RemoveContentsChecksPermissionsLikeUnlink) {
  Ino top = this->Dir("top", kRootIno, 0777);
  Ino locked = this->Dir("locked", top, 0555);  // nobody but root may remove from it
  this->File("f", locked);
  this->File("g", top);
  Ctx user;
  user.uid = 1000;
  user.gid = 1000;
  auto p = this->m_->RemoveContents(user, top, 1000);
  EXPECT_EQ(p.status().code(), EACCES);
  // What it could remove before is gone; what it could not is intact.
  EXPECT_TRUE(this->m_->Lookup(this->root_, locked, "f").ok());
  auto root_done = this->m_->RemoveContents(this->root_, top, 1000);
  ASSERT_TRUE(root_done.ok());
  EXPECT_TRUE(root_done->done);
}

}  // namespace
}  // namespace tierfs

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT

// A clone shares the source's slices: they lose their last reference only when both the
// source and the clone are gone.
TYPED_TEST(MetaTest, CloneSharesSlicesUntilBothSidesAreGone) {
  Ino src = this->Dir("src");
  Ino sub = this->Dir("sub", src);
  uint64_t a, b;
  this->WriteSlice(this->File("a", src), 0, 0, 5000, &a);
  this->WriteSlice(this->File("b", sub), 0, 0, 7000, &b);
  auto stats = this->m_->Clone(this->root_, src, kRootIno, "copy");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->dirs, 2u);
  EXPECT_EQ(this->m_->Clone(this->root_, src, kRootIno, "copy").status().code(), EEXIST);
  EXPECT_EQ(this->m_->Clone(this->root_, src, sub, "x").status().code(), EINVAL);
  auto copy = this->m_->Lookup(this->root_, kRootIno, "copy");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->second.nlink, 3u);  // ".", its entry, and "sub"
  auto csub = this->m_->Lookup(this->root_, copy->first, "sub");
  ASSERT_TRUE(csub.ok());
  auto cb = this->m_->Lookup(this->root_, csub->first, "b");
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(cb->second.length, 7000u);
  EXPECT_EQ((*this->m_->ReadChunk(cb->first, 0))[0].id, b);
  std::vector<uint64_t> deleted;
  this->m_->SetSliceDeleter([&](uint64_t id, uint32_t) {
    deleted.push_back(id);
    return Status::OK();
  });
  for (bool done = false; !done;) done = this->m_->RemoveContents(this->root_, src, 100)->done;
  ASSERT_TRUE(this->m_->Rmdir(this->root_, kRootIno, "src").ok());
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  EXPECT_TRUE(deleted.empty());  // the clone still refers to them
  for (bool done = false; !done;) done = this->m_->RemoveContents(this->root_, copy->first, 100)->done;
  ASSERT_TRUE(this->m_->RunCleanupOnce().ok());
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, (std::vector<uint64_t>{std::min(a, b), std::max(a, b)}));
}


// A clone of another user's file belongs to the caller, as cp's copy does: owned by the
// caller, in a group of the caller's, without set-user-ID or a file capability, and charged
// to the caller's quota (not the source owner's). Root's clone keeps the owner (cp -a).
TYPED_TEST(MetaTest, ACloneBelongsToTheCallerAndIsChargedToThem) {
  Ctx alice;
  alice.uid = alice.gid = 1000;
  Ctx bob;
  bob.uid = bob.gid = 1001;
  Ino pub = this->Dir("pub", kRootIno, 0777);
  auto f = this->m_->Mknod(alice, pub, "shared", S_IFREG | 06777, 0);
  ASSERT_TRUE(f.ok());
  Attr mode;
  mode.mode = 06777;  // Mknod applied no umask; make sure the bits are there
  ASSERT_TRUE(this->m_->SetAttr(alice, f->first, kSetMode, mode).ok());
  ASSERT_TRUE(this->m_->SetXattr(this->root_, f->first, "security.capability", "cap", 0).ok());
  ASSERT_TRUE(this->m_->SetXattr(alice, f->first, "user.note", "kept", 0).ok());
  this->WriteSlice(f->first, 0, 0, 100000);
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kUser, 1000, 0, 0).ok());
  ASSERT_TRUE(this->m_->SetQuota(QuotaKind::kUser, 1001, 0, 0).ok());
  const auto alice_before = **this->m_->GetQuota(QuotaKind::kUser, 1000);

  ASSERT_TRUE(this->m_->Clone(bob, f->first, pub, "bobs-copy").ok());
  auto copy = this->m_->Lookup(bob, pub, "bobs-copy");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->second.uid, 1001u);
  EXPECT_EQ(copy->second.gid, 1001u);
  EXPECT_EQ(copy->second.mode & 07777, 0777u) << "set-user-ID and set-group-ID go with the owner";
  EXPECT_EQ(copy->second.length, 100000u);
  EXPECT_EQ(this->Err(this->m_->GetXattr(this->root_, copy->first, "security.capability")), ENODATA);
  EXPECT_EQ(*this->m_->GetXattr(bob, copy->first, "user.note"), "kept");
  const auto alice_after = **this->m_->GetQuota(QuotaKind::kUser, 1000);
  const auto bob_after = **this->m_->GetQuota(QuotaKind::kUser, 1001);
  EXPECT_EQ(alice_after.used_inodes, alice_before.used_inodes);
  EXPECT_EQ(alice_after.used_bytes, alice_before.used_bytes);
  EXPECT_EQ(bob_after.used_inodes, 1);
  EXPECT_GE(bob_after.used_bytes, 100000);
  // Bob may remove his copy (the directory is his to write; the file is his).
  EXPECT_TRUE(this->m_->Unlink(bob, pub, "bobs-copy").ok());

  ASSERT_TRUE(this->m_->Clone(this->root_, f->first, pub, "roots-copy").ok());
  auto rc = this->m_->Lookup(this->root_, pub, "roots-copy");
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->second.uid, 1000u);
  EXPECT_EQ(rc->second.mode & 07777, 06777u);
}

}  // namespace
}  // namespace tierfs
