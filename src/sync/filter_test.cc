// rsync's include/exclude rules: the glob matcher and the order of evaluation.
#include "sync/filter.h"

#include <gtest/gtest.h>

namespace tierfs::sync {
namespace {

TEST(GlobMatch, Wildcards) {
  EXPECT_TRUE(GlobMatch("*.txt", "a.txt"));
  EXPECT_FALSE(GlobMatch("*.txt", "d/a.txt"));  // '*' stops at '/'
  EXPECT_TRUE(GlobMatch("**.txt", "d/a.txt"));
  EXPECT_TRUE(GlobMatch("d/**", "d/x/y"));
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_FALSE(GlobMatch("a?c", "a/c"));
  EXPECT_TRUE(GlobMatch("[a-c]x", "bx"));
  EXPECT_FALSE(GlobMatch("[!a-c]x", "bx"));
  EXPECT_TRUE(GlobMatch("[^a-c]x", "dx"));
  EXPECT_TRUE(GlobMatch("a\\*", "a*"));
  EXPECT_FALSE(GlobMatch("a\\*", "ab"));
  EXPECT_TRUE(GlobMatch("[x", "[x"));
  EXPECT_TRUE(GlobMatch("", ""));
  EXPECT_FALSE(GlobMatch("a", ""));
}

TEST(Filter, FirstMatchWins) {
  Filter f;
  f.Add(true, "keep.log");
  f.Add(false, "*.log");
  EXPECT_TRUE(f.Included("keep.log", false));
  EXPECT_TRUE(f.Included("d/keep.log", false));
  EXPECT_FALSE(f.Included("d/other.log", false));
  EXPECT_TRUE(f.Included("d/other.txt", false));
  Filter g;  // the other order: the exclude decides first
  g.Add(false, "*.log");
  g.Add(true, "keep.log");
  EXPECT_FALSE(g.Included("keep.log", false));
}

TEST(Filter, AnchoredDirOnlyAndWholePath) {
  Filter f;
  f.Add(false, "/top");
  f.Add(false, "cache/");
  f.Add(false, "a/b");
  EXPECT_FALSE(f.Included("top", false));
  EXPECT_TRUE(f.Included("x/top", false));    // anchored at the root only
  EXPECT_FALSE(f.Included("x/cache", true));  // a directory anywhere
  EXPECT_TRUE(f.Included("x/cache", false));  // not a file of that name
  EXPECT_FALSE(f.Included("a/b", false));
  EXPECT_FALSE(f.Included("z/a/b", false));   // unanchored: at any directory boundary
  EXPECT_TRUE(f.Included("za/b", false));
}

TEST(Filter, TripleStarAndIncludeOnlyOneTree) {
  Filter f;  // the classic "only this tree": include it, exclude everything else
  f.Add(true, "/data/***");
  f.Add(false, "*");
  EXPECT_TRUE(f.Included("data", true));
  EXPECT_TRUE(f.Included("data/x/y", false));
  EXPECT_FALSE(f.Included("other", true));
  EXPECT_FALSE(f.Included("top.txt", false));
}

TEST(Filter, ParentsOfObjectKeys) {
  Filter f;
  f.Add(false, "tmp/");
  EXPECT_FALSE(f.IncludedWithParents("a/tmp/x.bin"));  // excluded through its directory
  EXPECT_TRUE(f.IncludedWithParents("a/tmpx/x.bin"));
  EXPECT_FALSE(f.IncludedWithParents("a/tmp/"));
  EXPECT_TRUE(f.IncludedWithParents("a/tmp"));  // a file named tmp
}

}  // namespace
}  // namespace tierfs::sync
