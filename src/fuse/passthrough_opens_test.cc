// The daemon's side of the kernel's one-io-mode-per-inode rule (fuse/passthrough_opens.h),
// with the backing registration faked: which opens may be passthrough, that they share one
// backing id, that a caching open waits for passthrough readers and is woken by the last
// one's release (or refused after the wait), and that a refused backing file turns
// passthrough off without disturbing the counts.
#include "fuse/passthrough_opens.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

namespace tierfs::fuse_internal {
namespace {

class PassthroughOpensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs_pt_opens_XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    copy_ = tmpl;
  }
  void TearDown() override { unlink(copy_.c_str()); }
  std::unique_ptr<PassthroughOpens> Make(int fail = 0) {
    PassthroughOpens::Backing b;
    b.open = [this, fail](int, int) { return fail ? -fail : ++next_id_; };
    b.close = [this](int, int id) { closed_.push_back(id); };
    auto o = std::make_unique<PassthroughOpens>(-1, b);
    o->Enable(true);
    return o;
  }
  std::string copy_;
  int next_id_ = 0;
  std::vector<int> closed_;
};

TEST_F(PassthroughOpensTest, PassthroughOpensShareOneBackingUntilTheLastCloses) {
  auto o = Make();
  int id = o->BeginPassthrough(7, 100, "name-a", copy_);
  ASSERT_GT(id, 0);
  EXPECT_EQ(o->BeginPassthrough(7, 101, "name-a", ""), id) << "a second open must reuse the inode's backing";
  EXPECT_EQ(o->BeginPassthrough(7, 102, "name-b", copy_), 0) << "another content while the first is open";
  EXPECT_FALSE(o->TryBeginCached(7));
  o->End(7, 100);
  EXPECT_TRUE(closed_.empty());
  o->End(7, 101);
  EXPECT_EQ(closed_, std::vector<int>{id});
  EXPECT_TRUE(o->TryBeginCached(7));
}

TEST_F(PassthroughOpensTest, NoPassthroughWhileACachingOpenLasts) {
  auto o = Make();
  ASSERT_TRUE(o->TryBeginCached(7));
  EXPECT_EQ(o->BeginPassthrough(7, 100, "name-a", copy_), 0);
  EXPECT_GT(o->BeginPassthrough(8, 101, "name-b", copy_), 0) << "other inodes are not affected";
  o->End(7, 55);  // the caching open's release
  EXPECT_GT(o->BeginPassthrough(7, 102, "name-a", copy_), 0);
}

TEST_F(PassthroughOpensTest, CachingOpenWaitsForTheLastPassthroughRelease) {
  auto o = Make();
  ASSERT_GT(o->BeginPassthrough(7, 100, "name-a", copy_), 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    o->End(7, 100);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(o->WaitBeginCached(7));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  releaser.join();
  EXPECT_EQ(o->BeginPassthrough(7, 101, "name-a", copy_), 0) << "the caching open now counts";
}

TEST_F(PassthroughOpensTest, CachingOpenIsRefusedWhenReadersStay) {
  auto o = Make();
  ASSERT_GT(o->BeginPassthrough(7, 100, "name-a", copy_), 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(o->WaitBeginCached(7));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, PassthroughOpens::kConflictWait);
  o->End(7, 100);
  EXPECT_TRUE(o->TryBeginCached(7)) << "the refused open left no count behind";
}

TEST_F(PassthroughOpensTest, RefusedBackingTurnsPassthroughOffForGood) {
  auto o = Make(EPERM);
  EXPECT_EQ(o->BeginPassthrough(7, 100, "name-a", copy_), 0);
  EXPECT_FALSE(o->enabled());
  EXPECT_TRUE(o->TryBeginCached(7));  // opens are still counted
  EXPECT_EQ(o->BeginPassthrough(8, 101, "name-b", copy_), 0);
  // A copy that vanished (evicted) is no passthrough either, and no fallback.
  auto p = Make();
  EXPECT_EQ(p->BeginPassthrough(9, 102, "name-c", copy_ + ".gone"), 0);
  EXPECT_TRUE(p->enabled());
}

}  // namespace
}  // namespace tierfs::fuse_internal
