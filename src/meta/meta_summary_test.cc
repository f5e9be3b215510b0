// Tree summaries from metadata (meta_summary.cc), against every engine.
#include <gtest/gtest.h>

#include "meta/meta_test_fixture.h"

namespace tierfs {
namespace {

using namespace meta_testing;  // NOLINT: the fixture and its engines

TYPED_TEST(MetaTest, SummaryCountsATreeInStepsAndHardLinksOnce) {
  Ino top = this->Dir("top");
  Ino big = this->Dir("big", top);
  uint64_t bytes = 0;
  for (int i = 0; i < 1500; ++i) {  // more than one batch in one directory
    Ino f = this->File("f" + std::to_string(i), big);
    if (i % 100 == 0) {
      this->WriteSlice(f, 0, 0, 1000 + i);
      bytes += 1000 + i;
    }
  }
  Ino deep = this->Dir("deep", this->Dir("a", top));
  Ino linked = this->File("linked", deep);
  this->WriteSlice(linked, 0, 0, 7000);
  bytes += 7000;
  ASSERT_TRUE(this->m_->Link(this->root_, linked, top, "second").ok());
  ASSERT_TRUE(this->m_->Symlink(this->root_, deep, "sym", "linked").ok());
  this->File("outside");  // not in the tree

  Meta::SummaryWalk w;
  int steps = 0;
  while (!w.done) {
    ASSERT_TRUE(this->m_->SummaryStep(this->root_, top, &w, 400).ok());
    ASSERT_LT(++steps, 100);
  }
  EXPECT_GT(steps, 2);  // the budget splits the walk
  EXPECT_EQ(w.dirs, 4u);          // top, big, a, deep
  EXPECT_EQ(w.files, 1500u + 2);  // linked once, sym
  EXPECT_EQ(w.bytes, bytes);
  EXPECT_EQ(w.unreadable, 0u);

  Meta::SummaryWalk f;
  ASSERT_TRUE(this->m_->SummaryStep(this->root_, linked, &f, 400).ok());
  EXPECT_TRUE(f.done);
  EXPECT_EQ(f.files, 1u);
  EXPECT_EQ(f.dirs, 0u);
  EXPECT_EQ(f.bytes, 7000u);
}

TYPED_TEST(MetaTest, SummarySkipsDirectoriesTheCallerCannotRead) {
  Ino top = this->Dir("top", kRootIno, 0755);
  Ino locked = this->Dir("locked", top, 0700);
  this->File("hidden", locked);
  this->File("seen", top);
  Ctx user;
  user.uid = 1000;
  user.gid = 1000;
  Meta::SummaryWalk w;
  while (!w.done) ASSERT_TRUE(this->m_->SummaryStep(user, top, &w, 1000).ok());
  EXPECT_EQ(w.dirs, 2u);
  EXPECT_EQ(w.files, 1u);
  EXPECT_EQ(w.unreadable, 1u);
}

}  // namespace
}  // namespace tierfs
