#include "common/dir_walk.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

namespace tierfs {
namespace {

class DirWalkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs-dirwalk-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    // rm(1) removes trees of any depth (it walks with descriptors too).
    std::string cmd = "rm -rf '" + root_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  // root/chain/d/d/.../d, depth levels, a file "f" at every `every`-th level.
  void MakeChain(int depth, int every) {
    int fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(mkdirat(fd, "chain", 0755), 0);
    int cur = openat(fd, "chain", O_RDONLY | O_DIRECTORY);
    close(fd);
    for (int i = 1; i <= depth; ++i) {
      ASSERT_EQ(mkdirat(cur, "d", 0755), 0);
      int next = openat(cur, "d", O_RDONLY | O_DIRECTORY);
      close(cur);
      cur = next;
      if (i % every == 0) {
        int f = openat(cur, "f", O_WRONLY | O_CREAT, 0644);
        ASSERT_GE(f, 0);
        ASSERT_EQ(write(f, "x", 1), 1);
        close(f);
        ++files_;
      }
    }
    close(cur);
  }
  std::string root_;
  int files_ = 0;
};

TEST_F(DirWalkTest, FindsEveryFileOfAChainDeeperThanPathMax) {
  MakeChain(3000, 100);  // 6,000 bytes of path: more than PATH_MAX
  int found = 0;
  size_t longest_shown = 0;
  Status st = WalkRegularFiles({root_ + "/chain"}, [&](WalkFile f) {
    // The file is reachable through its short path, whatever its depth.
    struct stat s;
    EXPECT_EQ(stat(f.Path().c_str(), &s), 0) << f.Path();
    EXPECT_LT(f.Path().size(), 64u);
    longest_shown = std::max(longest_shown, f.Shown().size());
    ++found;
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(found, files_);
  EXPECT_LE(longest_shown, 1100u) << "messages keep the end of a long path";
}

TEST_F(DirWalkTest, WideTreesFilesGivenAsPathsAndSymlinks) {
  std::set<std::string> want;
  for (int d = 0; d < 5; ++d) {
    std::string dir = root_ + "/t/dir" + std::to_string(d) + "/sub";
    std::filesystem::create_directories(dir);
    for (int i = 0; i < 20; ++i) {
      std::string p = dir + "/f" + std::to_string(i);
      close(open(p.c_str(), O_WRONLY | O_CREAT, 0644));
      want.insert(p);
    }
  }
  ASSERT_EQ(symlink((root_ + "/t/dir0").c_str(), (root_ + "/t/link").c_str()), 0);  // not followed
  std::string single = root_ + "/single";
  close(open(single.c_str(), O_WRONLY | O_CREAT, 0644));
  std::set<std::string> shown;
  Status st = WalkRegularFiles({root_ + "/t", single}, [&](WalkFile f) {
    shown.insert(f.Shown());
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  want.insert(single);
  EXPECT_EQ(shown, want);
  // Stopping early.
  int n = 0;
  ASSERT_TRUE(WalkRegularFiles({root_ + "/t"}, [&](WalkFile) { return ++n < 7; }).ok());
  EXPECT_EQ(n, 7);
  EXPECT_EQ(WalkRegularFiles({root_ + "/missing"}, [](WalkFile) { return true; }).code(), ENOENT);
}

}  // namespace
}  // namespace tierfs
