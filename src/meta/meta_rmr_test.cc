// Batched tree removal (meta_rmr.cc) and clones (meta_clone.cc), against every engine.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tierfs
