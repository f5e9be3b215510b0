// Cache folders of volumes (chunk/cache_folders.h): listed with what they hold, and removed
// only when they are TierFS folders nobody uses and without staged writes.
#include "chunk/cache_folders.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chunk/local_files.h"

namespace tierfs {
namespace {

namespace fs = std::filesystem;

const std::string kOld = "11111111-2222-3333-4444-555555555555";
const std::string kStaged = "22222222-2222-3333-4444-555555555555";
const std::string kBusy = "33333333-2222-3333-4444-555555555555";
const std::string kEmpty = "44444444-2222-3333-4444-555555555555";

class CacheFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs_cache_folders_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (busy_fd_ >= 0) close(busy_fd_);
    fs::remove_all(dir_);
  }
  void Touch(const std::string& path, const std::string& data = "x") {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << data;
  }
  std::string dir_;
  int busy_fd_ = -1;
};

TEST_F(CacheFoldersTest, ListsTierfsFoldersAndRemovesOnlyUnusedOnesWithoutStagedData) {
  Touch(dir_ + "/" + kOld + "/index");
  Touch(dir_ + "/" + kOld + "/blocks/0a/00000000000000aa", std::string(1000, 'b'));
  Touch(dir_ + "/" + kStaged + "/index");
  Touch(dir_ + "/" + kStaged + "/staging/0000000000000001", "written, not uploaded");
  Touch(dir_ + "/" + kBusy + "/index");
  auto lock = LockDirectory(dir_ + "/" + kBusy, "a test", "");
  ASSERT_TRUE(lock.ok());
  busy_fd_ = *lock;
  fs::create_directories(dir_ + "/" + kEmpty);  // a UUID, but nothing TierFS makes
  Touch(dir_ + "/notes/index");                  // not a UUID

  auto folders = ListCacheFolders({dir_, dir_ + "/missing"}, true);
  ASSERT_EQ(folders.size(), 3u);
  EXPECT_EQ(folders[0].uuid, kOld);
  EXPECT_GE(folders[0].bytes, 1000u);
  EXPECT_FALSE(folders[0].in_use);
  EXPECT_EQ(folders[0].staged_files, 0u);
  EXPECT_GT(folders[0].last_used_ns, 0);
  EXPECT_EQ(folders[1].uuid, kStaged);
  EXPECT_EQ(folders[1].staged_files, 1u);
  EXPECT_EQ(folders[2].uuid, kBusy);
  EXPECT_TRUE(folders[2].in_use);

  EXPECT_TRUE(RemoveCacheFolder(dir_, kOld).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/" + kOld));
  EXPECT_EQ(RemoveCacheFolder(dir_, kOld).code(), ENOENT);
  EXPECT_EQ(RemoveCacheFolder(dir_, kStaged).code(), ENOTEMPTY);
  EXPECT_TRUE(fs::exists(dir_ + "/" + kStaged + "/staging/0000000000000001"));
  EXPECT_EQ(RemoveCacheFolder(dir_, kBusy).code(), EBUSY);
  EXPECT_TRUE(fs::exists(dir_ + "/" + kBusy + "/index"));
  EXPECT_EQ(RemoveCacheFolder(dir_, kEmpty).code(), EINVAL);
  EXPECT_EQ(RemoveCacheFolder(dir_, "notes").code(), EINVAL);
  EXPECT_TRUE(fs::exists(dir_ + "/notes/index"));
  // Nothing of the removal is left behind.
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tierfs-removing"), std::string::npos) << e.path();
  }
  // Once its mount is gone, the busy one goes too.
  close(busy_fd_);
  busy_fd_ = -1;
  EXPECT_TRUE(RemoveCacheFolder(dir_, kBusy).ok());
}

TEST_F(CacheFoldersTest, IsVolumeUuid) {
  EXPECT_TRUE(IsVolumeUuid(kOld));
  EXPECT_TRUE(IsVolumeUuid("abcdef01-2345-6789-abcd-ef0123456789"));
  EXPECT_FALSE(IsVolumeUuid("uuid"));
  EXPECT_FALSE(IsVolumeUuid("abcdef01-2345-6789-abcd-ef012345678g"));
  EXPECT_FALSE(IsVolumeUuid("abcdef0102345-6789-abcd-ef0123456789"));
}

}  // namespace
}  // namespace tierfs
