// fsck over the in-memory engine and store, on volumes damaged on purpose.
#include "tools/fsck.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>

#include "chunk/block_key.h"
#include "common/encoding.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/mem_volume_for_test.h"

namespace tierfs {
namespace {

class FsckTest : public testing::MemVolumeTest {
 protected:
  void SetUp() override {
    MemVolumeTest::SetUp();
    dir_ = meta_->Mkdir(root_, kRootIno, "dir", 0755)->first;
    file_ = File(dir_, "file", 2 * kBlock, &slice_);
    File(kRootIno, "other", 100, nullptr);
    ASSERT_TRUE(meta_->Link(root_, file_, kRootIno, "hardlink").ok());
    ASSERT_TRUE(meta_->Symlink(root_, dir_, "sym", "file").ok());
  }
  Ino File(Ino parent, const std::string& name, uint32_t size, uint64_t* slice) {
    auto f = meta_->Mknod(root_, parent, name, S_IFREG | 0644, 0);
    EXPECT_TRUE(f.ok());
    uint64_t id = *meta_->NewSliceId();
    for (uint32_t i = 0; i < BlockCount(size, kBlock); ++i) {
      uint32_t len = BlockLength(size, kBlock, i);
      EXPECT_TRUE(store_->Put(BlockKey(vol_, id, i, len), std::string(len, 'x')).ok());
    }
    SliceRecord rec;
    rec.id = id;
    rec.size = rec.len = size;
    EXPECT_TRUE(meta_->WriteSlice(f->first, 0, rec, size, 1).ok());
    if (slice) *slice = id;
    return f->first;
  }
  FsckReport Check(bool repair, const std::string& path = "/") {
    FsckOptions opts;
    opts.repair = repair;
    opts.path = path;
    auto r = CheckVolume(meta_.get(), store_.get(), opts);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : FsckReport{};
  }
  static bool Has(const FsckReport& r, const std::string& kind, const std::string& path) {
    for (const auto& p : r.problems) {
      if (p.kind == kind && p.path == path) return true;
    }
    return false;
  }
  Status Raw(const std::function<Status(KvTxn&)>& fn) { return meta_->engine()->Txn(fn); }

  Ctx root_ = Ctx::Root();
  Ino dir_ = 0, file_ = 0;
  uint64_t slice_ = 0;
};

TEST_F(FsckTest, CleanVolumeHasNoProblems) {
  FsckReport r = Check(false);
  EXPECT_TRUE(r.problems.empty()) << r.problems[0].kind << " " << r.problems[0].path << " " << r.problems[0].detail;
  EXPECT_EQ(r.dirs, 2u);
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.others, 1u);
  EXPECT_EQ(r.objects_checked, 3u);
}

TEST_F(FsckTest, ReportsLostAndDamagedChangeLogReaders) {
  // A reader that holds commit 0 while the log (empty: the next record is 1) holds all it
  // needs is fine; one whose records were trimmed away is lost; a damaged record is named.
  ChangeConsumer ok;
  ok.name = "mirror:ok";
  ok.updated_ns = 1;
  ASSERT_TRUE(PutChangeConsumer(meta_->engine(), ok).ok());
  EXPECT_TRUE(Check(false).problems.empty());
  ASSERT_TRUE(meta_->engine()->Txn([](KvTxn& t) {
    return t.Put(keys::Counter("changeSeq"), keys::EncodeU64(9));  // as if records 1-8 were trimmed
  }).ok());
  ASSERT_TRUE(meta_->engine()->Txn([](KvTxn& t) { return t.Put(ChangeRecordKey(9), std::string(8, '\0')); }).ok());
  FsckReport r = Check(false);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].kind, "change-log-reader-lost");
  EXPECT_NE(r.problems[0].detail.find("--drop-consumer mirror:ok"), std::string::npos) << r.problems[0].detail;
  ASSERT_TRUE(meta_->engine()->Txn([](KvTxn& t) { return t.Put(ChangeConsumerKey("bad"), "{"); }).ok());
  r = Check(false);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].kind, "damaged-record");
}

TEST_F(FsckTest, MissingAndShortObjectsNameTheFile) {
  ASSERT_TRUE(store_->Delete(BlockKey(vol_, slice_, 1, kBlock)).ok());
  FsckReport r = Check(true);
  // Reported under the first name found breadth-first: the root's hard link.
  EXPECT_TRUE(Has(r, "missing-object", "/hardlink"));
  EXPECT_EQ(r.Remaining(), 1u);  // data is never invented
  ASSERT_TRUE(store_->Put(BlockKey(vol_, slice_, 1, kBlock), "short").ok());
  r = Check(false);
  EXPECT_TRUE(Has(r, "bad-object-size", "/hardlink"));
}

TEST_F(FsckTest, RepairsLinkCountsAndDanglingEntries) {
  // A wrong link count on a file and on a directory, and an entry whose inode is gone.
  ASSERT_TRUE(meta_->RepairLinkCount(file_, 7).ok());
  ASSERT_TRUE(meta_->RepairLinkCount(dir_, 9).ok());
  auto other = meta_->Lookup(root_, kRootIno, "other");
  ASSERT_TRUE(Raw([&](KvTxn& t) { return t.Delete(keys::Inode(other->first)); }).ok());
  FsckReport r = Check(false);
  EXPECT_TRUE(Has(r, "link-count", "/hardlink"));
  EXPECT_TRUE(Has(r, "link-count", "/dir"));
  EXPECT_TRUE(Has(r, "dangling-entry", "/other"));
  EXPECT_EQ(meta_->GetAttr(file_)->nlink, 7u);  // reporting changes nothing
  r = Check(true);
  EXPECT_EQ(r.Remaining(), 0u);
  EXPECT_EQ(meta_->GetAttr(file_)->nlink, 2u);
  EXPECT_EQ(meta_->GetAttr(dir_)->nlink, 2u);
  EXPECT_EQ(meta_->Lookup(root_, kRootIno, "other").status().code(), ENOENT);
  EXPECT_TRUE(Check(false).problems.empty());
}

TEST_F(FsckTest, ReportsOrphansAndTypeMismatches) {
  // Drop both names of the file by hand: the inode is still there with two links.
  ASSERT_TRUE(Raw([&](KvTxn& t) {
                RETURN_IF_ERROR(t.Delete(keys::Dentry(dir_, "file")));
                return t.Delete(keys::Dentry(kRootIno, "hardlink"));
              }).ok());
  // An entry claiming to be a directory for a symlink.
  auto sym = meta_->Lookup(root_, dir_, "sym");
  std::string v;
  PutU64(&v, sym->first);
  PutU8(&v, S_IFDIR >> 12);
  ASSERT_TRUE(Raw([&](KvTxn& t) { return t.Put(keys::Dentry(dir_, "sym"), v); }).ok());
  FsckReport r = Check(true);
  EXPECT_TRUE(Has(r, "orphan", "<inode " + std::to_string(file_) + ">"));
  EXPECT_TRUE(Has(r, "type-mismatch", "/dir/sym"));
  EXPECT_EQ(meta_->GetAttr(file_)->nlink, 2u);  // orphans are left for a person to decide
}

TEST_F(FsckTest, SubtreeAndBadPath) {
  ASSERT_TRUE(store_->Delete(BlockKey(vol_, slice_, 0, kBlock)).ok());
  FsckReport r = Check(false, "/dir");
  EXPECT_TRUE(Has(r, "missing-object", "/dir/file"));
  EXPECT_EQ(r.dirs, 1u);
  FsckOptions opts;
  opts.path = "/nope";
  EXPECT_EQ(CheckVolume(meta_.get(), store_.get(), opts).status().code(), ENOENT);
}

}  // namespace
}  // namespace tierfs
