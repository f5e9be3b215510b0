// Flat copies (chunk/flat_files.h): built from a fill and served at once; found at start,
// checked at once and removed when damaged; kept within their capacity,
// least recently used first; a failed fill leaves nothing.
#include "chunk/flat_files.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tierfs {
namespace {

namespace fs = std::filesystem;

std::string Name(char c) { return std::string(32, c); }

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
  return s;
}

FlatFiles::Fill WriteOf(std::string data) {
  return [data](int fd) {
    if (pwrite(fd, data.data(), data.size(), 0) != static_cast<ssize_t>(data.size())) {
      return Status::Err(EIO, "short write");
    }
    return Status::OK();
  };
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FlatFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs_flat_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<FlatFiles> Open(uint64_t capacity = 64 << 20, int64_t keep_ns = 0) {
    auto f = FlatFiles::Open(dir_ + "/flat", capacity, 0.0, keep_ns);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }
  std::string dir_;
};

TEST_F(FlatFilesTest, BuiltCopyIsServedAndHoldsTheBytes) {
  auto f = Open();
  std::string data = Bytes(3 * 1048576 + 17, 1);
  EXPECT_EQ(f->Ready(Name('a')), "");
  f->Want(Name('a'), data.size(), WriteOf(data));
  f->WaitIdle();
  std::string path = f->Ready(Name('a'));
  ASSERT_NE(path, "");
  EXPECT_EQ(ReadFile(path), data);
  EXPECT_EQ(f->stats().built, 1u);
  EXPECT_EQ(f->stats().bytes, data.size());
  // Holes the fill leaves read as zeros.
  f->Want(Name('b'), 5000, [](int fd) { return pwrite(fd, "x", 1, 4000) == 1 ? Status::OK() : Status::Err(EIO, "w"); });
  f->WaitIdle();
  std::string sparse = ReadFile(f->Ready(Name('b')));
  ASSERT_EQ(sparse.size(), 5000u);
  EXPECT_EQ(sparse[4000], 'x');
  EXPECT_EQ(sparse[0], '\0');
}

TEST_F(FlatFilesTest, FailedFillLeavesNothing) {
  auto f = Open();
  f->Want(Name('a'), 4096, [](int) { return Status::Err(EIO, "the store failed"); });
  f->WaitIdle();
  EXPECT_EQ(f->Ready(Name('a')), "");
  EXPECT_EQ(f->stats().failed, 1u);
  EXPECT_FALSE(fs::exists(dir_ + "/flat/" + Name('a')));
  EXPECT_TRUE(fs::is_empty(dir_ + "/flat/tmp"));
  // It may be wanted again.
  f->Want(Name('a'), 4, WriteOf("abcd"));
  f->WaitIdle();
  EXPECT_NE(f->Ready(Name('a')), "");
}

TEST_F(FlatFilesTest, FoundCopiesAreCheckedBeforeUseAndDamagedOnesRemoved) {
  std::string good = Bytes(2 * 1048576 + 5, 2), bad = Bytes(1048576 * 3 / 2, 3);
  {
    auto f = Open();
    f->Want(Name('a'), good.size(), WriteOf(good));
    f->Want(Name('b'), bad.size(), WriteOf(bad));
    f->WaitIdle();
  }
  {  // damage one byte of b, after its sums were written
    std::fstream io(dir_ + "/flat/" + Name('b'), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(1048576 + 3);
    io.put('\x5a' ^ bad[1048576 + 3]);
  }
  auto f = Open();
  f->WaitIdle();  // found copies are checked from the start, without being asked for
  EXPECT_EQ(f->stats().verified, 1u);
  EXPECT_EQ(f->stats().damaged, 1u);
  EXPECT_EQ(ReadFile(f->Ready(Name('a'))), good);
  EXPECT_EQ(f->Ready(Name('b')), "");
  EXPECT_FALSE(fs::exists(dir_ + "/flat/" + Name('b')));
  EXPECT_FALSE(fs::exists(dir_ + "/flat/" + Name('b') + ".sums"));
  EXPECT_EQ(f->stats().verified, 1u);
  EXPECT_EQ(f->stats().damaged, 1u);
}

TEST_F(FlatFilesTest, CopyWithoutSumsOrTruncatedIsNeverTrusted) {
  std::string data = Bytes(1048576 + 1, 4);
  {
    auto f = Open();
    f->Want(Name('a'), data.size(), WriteOf(data));
    f->Want(Name('b'), data.size(), WriteOf(data));
    f->WaitIdle();
  }
  fs::remove(dir_ + "/flat/" + Name('a') + ".sums");
  fs::resize_file(dir_ + "/flat/" + Name('b'), 1048576);
  auto f = Open();
  f->Ready(Name('a'));
  f->Ready(Name('b'));
  f->WaitIdle();
  EXPECT_EQ(f->Ready(Name('a')), "");
  EXPECT_EQ(f->Ready(Name('b')), "");
  EXPECT_EQ(f->stats().damaged, 2u);
}

TEST_F(FlatFilesTest, CapacityEvictsTheLeastRecentlyUsed) {
  auto f = Open(3 << 20);
  for (char c : {'a', 'b', 'c'}) f->Want(Name(c), 1 << 20, WriteOf(Bytes(1 << 20, c)));
  f->WaitIdle();
  EXPECT_NE(f->Ready(Name('a')), "");  // a is used again: b is now the oldest
  f->Want(Name('d'), 1 << 20, WriteOf(Bytes(1 << 20, 'd')));
  f->WaitIdle();
  EXPECT_NE(f->Ready(Name('a')), "");
  EXPECT_EQ(f->Ready(Name('b')), "");
  EXPECT_FALSE(fs::exists(dir_ + "/flat/" + Name('b')));
  EXPECT_NE(f->Ready(Name('c')), "");
  EXPECT_NE(f->Ready(Name('d')), "");
  EXPECT_EQ(f->stats().evicted, 1u);
  EXPECT_LE(f->stats().bytes, 3u << 20);
  // A copy larger than the whole capacity is never built.
  EXPECT_FALSE(f->WouldBuild(Name('e'), 4 << 20));
  EXPECT_FALSE(f->WouldBuild(Name('a'), 1 << 20));  // exists
  EXPECT_TRUE(f->WouldBuild(Name('f'), 1 << 20));
  f->Want(Name('e'), 4 << 20, WriteOf(Bytes(4 << 20, 'e')));
  f->WaitIdle();
  EXPECT_EQ(f->Ready(Name('e')), "");
  EXPECT_EQ(f->stats().evicted, 1u);
}

TEST_F(FlatFilesTest, RecentlyUsedCopiesAreNotEvictedForNewOnes) {
  auto f = Open(2 << 20, /*keep_ns=*/3'600'000'000'000);
  for (char c : {'a', 'b'}) f->Want(Name(c), 1 << 20, WriteOf(Bytes(1 << 20, c)));
  f->WaitIdle();
  // Both were used just now: a third waits instead of replacing one (no churn).
  f->Want(Name('c'), 1 << 20, WriteOf(Bytes(1 << 20, 'c')));
  f->WaitIdle();
  EXPECT_EQ(f->Ready(Name('c')), "");
  EXPECT_NE(f->Ready(Name('a')), "");
  EXPECT_NE(f->Ready(Name('b')), "");
  EXPECT_EQ(f->stats().evicted, 0u);
  EXPECT_EQ(f->stats().failed, 0u);
}

TEST_F(FlatFilesTest, BuildsLeftByACrashAreRemovedAtStart) {
  fs::create_directories(dir_ + "/flat/tmp");
  std::ofstream(dir_ + "/flat/tmp/" + Name('a')) << "half";
  auto f = Open();
  EXPECT_TRUE(fs::is_empty(dir_ + "/flat/tmp"));
  EXPECT_EQ(f->Ready(Name('a')), "");
}

}  // namespace
}  // namespace tierfs
