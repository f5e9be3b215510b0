// The checkpoint file: what a restarted run learns from it, torn last lines, identities.
#include "sync/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace tierfs::sync {
namespace {

std::string TempPath() {
  char buf[] = "/tmp/tierfs-cp-XXXXXX";
  int fd = mkstemp(buf);
  close(fd);
  unlink(buf);
  return buf;
}

TEST(Checkpoint, RestartLearnsWatermarkJournalAndDirs) {
  std::string path = TempPath();
  {
    auto cp = Checkpoint::Open(path, "a -> b");
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    EXPECT_FALSE((*cp)->state().resumed);
    (*cp)->Dir(DirAttr{"d\tir/", 5, 0755, 1, 2});
    (*cp)->Begin('c', "d\tir/f1");
    (*cp)->End('c', 'c', 100, "d\tir/f1");
    Counts c;
    c.found = 3;
    c.copied = 1;
    c.skipped = 2;
    c.bytes = 100;
    (*cp)->Advance("d\tir/f1", c);
    (*cp)->Begin('c', "d\tir/f2\n");            // handed out, never ended
    (*cp)->Begin('c', "d\tir/f3");
    (*cp)->End('c', 'c', 7, "d\tir/f3");         // ended past the watermark
    (*cp)->Begin('d', "old");
    (*cp)->Link("1:2", 9, "d\tir/f3");
  }
  {
    std::ofstream torn(path, std::ios::app);
    torn << "E\tc\tc 5";  // a process killed in the middle of a line
  }
  auto cp = Checkpoint::Open(path, "a -> b");
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  const auto& st = (*cp)->state();
  EXPECT_TRUE(st.resumed);
  EXPECT_EQ(st.watermark, "d\tir/f1");
  EXPECT_EQ(st.counts.found, 3u);
  EXPECT_EQ(st.counts.bytes, 100u);
  ASSERT_EQ(st.dirs.size(), 1u);
  EXPECT_EQ(st.dirs[0].key, "d\tir/");
  EXPECT_EQ(st.dirs[0].mode, 0755u);
  EXPECT_EQ(st.done.size(), 1u);
  EXPECT_EQ(st.done.at("d\tir/f3"), 'c');
  EXPECT_EQ(st.done_bytes.at("d\tir/f3"), 7u);
  EXPECT_EQ(st.pending_copy.count("d\tir/f2\n"), 1u);
  EXPECT_EQ(st.pending_delete.count("old"), 1u);
  EXPECT_EQ(st.links.at("1:2").first, 9u);
  // Reopened after a rewrite, it says the same.
  auto again = Checkpoint::Open(path, "a -> b");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->state().done.size(), 1u);
  EXPECT_EQ((*again)->state().pending_copy.size(), 1u);
  EXPECT_TRUE((*again)->Finish().ok());
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(Checkpoint, RefusesAnotherRunsFile) {
  std::string path = TempPath();
  {
    auto cp = Checkpoint::Open(path, "a -> b");
    ASSERT_TRUE(cp.ok());
  }
  auto other = Checkpoint::Open(path, "a -> c");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another run"), std::string::npos);
  unlink(path.c_str());
}

TEST(Checkpoint, DamagedFileIsRefused) {
  std::string path = TempPath();
  {
    std::ofstream f(path);
    f << "garbage\n";
  }
  auto cp = Checkpoint::Open(path, "a -> b");
  ASSERT_FALSE(cp.ok());
  EXPECT_NE(cp.status().message().find("damaged"), std::string::npos);
  unlink(path.c_str());
}

}  // namespace
}  // namespace tierfs::sync
