// Write-back on a real directory: the staging area's durability rules and recovery, the
// background uploader's order, retries and discards, and the cached store's write and read
// paths through it.
#include "chunk/writeback.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "chunk/block_key.h"
#include "chunk/cached_store.h"
#include "chunk/fake_store_for_test.h"
#include "chunk/slice_writer.h"
#include "chunk/staging.h"

namespace tierfs {
namespace {

namespace fs = std::filesystem;
using testing::FakeStore;
using testing::RandomBytes;

class WritebackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs-writeback-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = std::string(tmpl) + "/staging";
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }

  std::unique_ptr<Staging> OpenStaging(std::vector<Staging::Entry>* staged = nullptr) {
    std::vector<Staging::Entry> s;
    std::vector<std::string> damaged;
    auto st = Staging::Open(dir_, staged ? staged : &s, &damaged);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return st.ok() ? std::move(*st) : nullptr;
  }
  static std::string Key(uint64_t slice, uint32_t index, uint32_t len = 1000) {
    return BlockKey("vol", slice, index, len);
  }
  static std::shared_ptr<const std::string> Data(const std::string& key) {
    uint32_t len = 0;
    std::string v;
    uint64_t id;
    uint32_t index;
    ParseBlockKey(key, &v, &id, &index, &len);
    return std::make_shared<const std::string>(RandomBytes(len, static_cast<uint32_t>(id * 100 + index)));
  }

  // A writeback whose uploads go to store_ (each Put counted in order_).
  std::unique_ptr<Writeback> Open(int threads = 1, uint64_t memory = 64 << 20,
                                  std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
    std::vector<Staging::Entry> staged;
    auto staging = OpenStaging(&staged);
    Writeback::Options o;
    o.threads = threads;
    o.memory_bytes = memory;
    o.backoff_base = std::chrono::milliseconds(1);
    o.backoff_cap = std::chrono::milliseconds(20);
    o.delay = delay;
    return std::make_unique<Writeback>(
        std::move(staging), staged,
        [this](const std::string& key, std::string_view data) {
          Status st = store_.Put(key, data);
          if (st.ok()) {
            std::lock_guard<std::mutex> l(mu_);
            order_.push_back(key);
          }
          return st;
        },
        [this](const std::string& key) { ASSERT_TRUE(store_.Delete(key).ok()); },
        [this](const std::string& key, const std::shared_ptr<const std::string>&) {
          std::lock_guard<std::mutex> l(mu_);
          landed_.push_back(key);
        },
        o);
  }

  std::string dir_;
  FakeStore store_;
  std::mutex mu_;
  std::vector<std::string> order_, landed_;
};

TEST_F(WritebackTest, StagedBlocksAreDurableFilesReadBackVerified) {
  auto s = OpenStaging();
  ASSERT_TRUE(s->Put(7, Key(1, 0), *Data(Key(1, 0))).ok());
  ASSERT_TRUE(s->Put(9, Key(1, 1), *Data(Key(1, 1))).ok());
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/0000000000000007").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto got = s->Read({7, Key(1, 0), 1000});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, *Data(Key(1, 0)));
  // A flipped byte, or a file holding another block, is an error, never the bytes.
  {
    std::fstream f(dir_ + "/0000000000000009", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_EQ(s->Read({9, Key(1, 1), 1000}).status().code(), EIO);
  EXPECT_EQ(s->Read({7, Key(2, 0), 1000}).status().code(), EIO);
  EXPECT_EQ(s->first_free_seq(), 1u);
}

TEST_F(WritebackTest, OpenListsStagedBlocksInOrderAndClearsLeftovers) {
  {
    auto s = OpenStaging();
    for (uint64_t seq : {5, 3, 12}) ASSERT_TRUE(s->Put(seq, Key(seq, 0), *Data(Key(seq, 0))).ok());
    // A second process cannot take the area while this one has it.
    std::vector<Staging::Entry> st2;
    std::vector<std::string> dmg;
    auto other = Staging::Open(dir_, &st2, &dmg);
    EXPECT_EQ(other.status().code(), EBUSY);
  }
  std::ofstream(dir_ + "/tmp.0000000000000020") << "half a block";  // a Put cut short
  std::ofstream(dir_ + "/0000000000000004") << "garbage";            // damaged
  std::vector<Staging::Entry> staged;
  std::vector<std::string> damaged;
  auto s = Staging::Open(dir_, &staged, &damaged);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(staged.size(), 3u);
  EXPECT_EQ(staged[0].seq, 3u);
  EXPECT_EQ(staged[1].seq, 5u);
  EXPECT_EQ(staged[2].seq, 12u);
  EXPECT_EQ(staged[2].key, Key(12, 0));
  EXPECT_EQ(staged[2].len, 1000u);
  EXPECT_EQ((*s)->first_free_seq(), 13u);
  ASSERT_EQ(damaged.size(), 1u);
  EXPECT_TRUE(fs::exists(dir_ + "/damaged.0000000000000004"));
  EXPECT_FALSE(fs::exists(dir_ + "/tmp.0000000000000020"));
}

TEST_F(WritebackTest, UploadsInStagingOrderAndReadsWhileStaged) {
  store_.HoldPuts(true);
  auto wb = Open(/*threads=*/1, /*memory=*/1500);  // the second block is read back from disk
  std::vector<std::string> keys = {Key(1, 0), Key(1, 1), Key(2, 0), Key(3, 0)};
  for (const auto& k : keys) ASSERT_TRUE(wb->Stage(k, Data(k)).ok());
  EXPECT_TRUE(wb->HasSlice(1));
  EXPECT_FALSE(wb->HasSlice(4));
  for (const auto& k : keys) {
    auto b = wb->Read(k);
    ASSERT_NE(b, nullptr) << k;
    EXPECT_EQ(*b, *Data(k));
  }
  EXPECT_EQ(wb->stats().staged_blocks, 4u);
  EXPECT_EQ(wb->stats().staged_bytes, 4000u);
  store_.HoldPuts(false);
  WritebackStats left = wb->Drain(std::chrono::seconds(30), {});
  EXPECT_EQ(left.staged_blocks, 0u);
  EXPECT_EQ(order_, keys);
  EXPECT_EQ(landed_, keys);
  for (const auto& k : keys) EXPECT_EQ(store_.Data(k), *Data(k));
  EXPECT_EQ(wb->Read(keys[0]), nullptr);
  EXPECT_FALSE(wb->HasSlice(1));
  EXPECT_EQ(wb->stats().uploaded_blocks, 4u);
  // Nothing is left on disk but the lock.
  std::vector<std::string> left_files;
  for (auto& e : fs::directory_iterator(dir_)) left_files.push_back(e.path().filename());
  EXPECT_EQ(left_files, std::vector<std::string>{"lock"});
}

TEST_F(WritebackTest, AFailingStoreIsRetriedUntilItWorks) {
  store_.put_errno = EIO;
  store_.put_fail_count = 5;
  auto wb = Open(2);
  ASSERT_TRUE(wb->Stage(Key(1, 0), Data(Key(1, 0))).ok());
  EXPECT_EQ(wb->Drain(std::chrono::seconds(30), {}).staged_blocks, 0u);
  EXPECT_EQ(wb->stats().retries, 5u);
  EXPECT_TRUE(store_.Has(Key(1, 0)));
}

TEST_F(WritebackTest, DiscardedBlocksNeverStayInTheStore) {
  store_.HoldPuts(true);
  auto wb = Open(1);
  ASSERT_TRUE(wb->Stage(Key(1, 0), Data(Key(1, 0))).ok());  // taken by the uploader, held
  ASSERT_TRUE(wb->Stage(Key(2, 0), Data(Key(2, 0))).ok());  // queued behind it
  for (int i = 0; i < 200 && store_.puts.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  wb->Discard(Key(2, 0));  // queued: dropped at once
  EXPECT_EQ(wb->Read(Key(2, 0)), nullptr);
  wb->Discard(Key(1, 0));  // uploading: deleted once it lands
  store_.HoldPuts(false);
  EXPECT_EQ(wb->Drain(std::chrono::seconds(30), {}).staged_blocks, 0u);
  EXPECT_FALSE(store_.Has(Key(1, 0)));
  EXPECT_FALSE(store_.Has(Key(2, 0)));
  EXPECT_TRUE(landed_.empty());
}

TEST_F(WritebackTest, WhatAStoppedProcessStagedIsUploadedByTheNext) {
  store_.put_errno = EIO;  // the store is down for the first process
  {
    auto wb = Open(1);
    ASSERT_TRUE(wb->Stage(Key(1, 0), Data(Key(1, 0))).ok());
    ASSERT_TRUE(wb->Stage(Key(1, 1), Data(Key(1, 1))).ok());
    ASSERT_TRUE(wb->Stage(Key(2, 0), Data(Key(2, 0))).ok());
    wb->Mark(1);
  }  // stops with all three still staged
  EXPECT_EQ(store_.Count(), 0u);
  store_.put_errno = 0;
  store_.HoldPuts(true);  // staged until read below (Read serves only staged blocks)
  auto wb = Open(2);
  EXPECT_EQ(wb->stats().staged_blocks, 3u);
  auto staged = wb->Read(Key(1, 1));
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(*staged, *Data(Key(1, 1)));
  store_.HoldPuts(false);
  EXPECT_EQ(wb->Drain(std::chrono::seconds(30), {}).staged_blocks, 0u);
  EXPECT_EQ(store_.Count(), 3u);
  // The recovered slices' staged marks may go now.
  auto marks = wb->TakeUploadedMarks();
  std::sort(marks.begin(), marks.end());
  EXPECT_EQ(marks, (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(wb->TakeUploadedMarks().empty());
}

TEST_F(WritebackTest, MarksComeBackOnlyOnceTheirSliceIsUploaded) {
  store_.HoldPuts(true);
  auto wb = Open(1);
  ASSERT_TRUE(wb->Stage(Key(7, 0), Data(Key(7, 0))).ok());
  wb->Mark(7);
  wb->Mark(8);  // a slice with nothing staged (uploaded before its commit)
  EXPECT_EQ(wb->TakeUploadedMarks(), std::vector<uint64_t>{8});
  store_.HoldPuts(false);
  wb->Drain(std::chrono::seconds(30), {});
  EXPECT_EQ(wb->TakeUploadedMarks(), std::vector<uint64_t>{7});
}

// --upload-delay: uploads wait (here: an hour) unless a drain hurries them; a block deleted
// meanwhile never reaches the store.
TEST_F(WritebackTest, TheUploadDelayHoldsUploadsUntilADrain) {
  auto wb = Open(2, 64 << 20, std::chrono::hours(1));
  ASSERT_TRUE(wb->Stage(Key(1, 0), Data(Key(1, 0))).ok());
  ASSERT_TRUE(wb->Stage(Key(2, 0), Data(Key(2, 0))).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(store_.puts.load(), 0);
  wb->Discard(Key(2, 0));
  EXPECT_EQ(wb->Drain(std::chrono::seconds(30), {}).staged_blocks, 0u);
  EXPECT_TRUE(store_.Has(Key(1, 0)));
  EXPECT_FALSE(store_.Has(Key(2, 0)));
  EXPECT_EQ(store_.puts.load(), 1);
}

TEST_F(WritebackTest, AStagingAreaThatFailsIsBypassed) {
  auto wb = Open(1);
  fs::remove_all(dir_);  // every later Put fails
  EXPECT_FALSE(wb->Stage(Key(1, 0), Data(Key(1, 0))).ok());
  EXPECT_EQ(wb->stats().stage_errors, 1u);
  EXPECT_EQ(wb->stats().staged_blocks, 0u);
}

// Through the cached store: a writer's uploads are staged (Finish returns while the store
// holds every put), the slice reads back from staging, and lands in the store later.
TEST_F(WritebackTest, CachedStoreStagesWritesAndReadsThemBack) {
  auto fake = std::make_unique<FakeStore>();
  FakeStore* store = fake.get();
  StoreConfig cfg;
  cfg.volume = "vol";
  cfg.block_size = 64 << 10;
  cfg.cache_bytes = 0;  // reads must come from staging, not memory
  CachedStore cs(std::move(fake), cfg);
  ASSERT_TRUE(cs.StartWriteback(dir_, 2).ok());
  ASSERT_TRUE(cs.writeback());
  store->HoldPuts(true);
  std::string data = RandomBytes(200 << 10, 3);  // three full blocks and a short one
  {
    auto w = cs.NewSliceWriter(42);
    ASSERT_TRUE(w->Write(0, data));
    ASSERT_TRUE(w->Finish().ok());
  }
  EXPECT_TRUE(cs.SliceStaged(42));
  std::string back(data.size(), '\0');
  ASSERT_TRUE(cs.ReadSlice(42, static_cast<uint32_t>(data.size()), 0, static_cast<uint32_t>(data.size()), back.data()).ok());
  EXPECT_EQ(back, data);
  std::string piece(100, '\0');  // a small read is served from staging too, not a ranged get
  ASSERT_TRUE(cs.ReadSlice(42, static_cast<uint32_t>(data.size()), 70000, 100, piece.data()).ok());
  EXPECT_EQ(piece, data.substr(70000, 100));
  EXPECT_EQ(store->gets.load(), 0);
  store->HoldPuts(false);
  EXPECT_EQ(cs.DrainWriteback(std::chrono::seconds(30), {}).staged_blocks, 0u);
  EXPECT_FALSE(cs.SliceStaged(42));
  EXPECT_EQ(store->Count(), 4u);
  // Deleting a staged slice discards its blocks: nothing reaches the store.
  store->HoldPuts(true);
  {
    auto w = cs.NewSliceWriter(43);
    ASSERT_TRUE(w->Write(0, std::string_view(data).substr(0, 1000)));
    ASSERT_TRUE(w->Finish().ok());
  }
  ASSERT_TRUE(cs.DeleteSlice(43, 1000).ok());
  store->HoldPuts(false);
  cs.DrainWriteback(std::chrono::seconds(30), {});
  EXPECT_FALSE(store->Has(BlockKey("vol", 43, 0, 1000)));
}

// Small-file packing: small slices marked packable go up as one pack, the recorder hears
// where each one is, and reads through the pack location fetch ranges of it; slices not
// marked packable (and a failed record) are handled on their own.
TEST_F(WritebackTest, SmallSlicesMarkedPackableGoUpAsOnePack) {
  auto fake = std::make_unique<FakeStore>();
  FakeStore* store = fake.get();
  StoreConfig cfg;
  cfg.volume = "vol";
  cfg.block_size = 64 << 10;
  cfg.cache_bytes = 0;
  cfg.pack_below = 16 << 10;
  CachedStore cs(std::move(fake), cfg);
  std::mutex mu;
  std::map<uint64_t, PackRef> where;
  std::atomic<int> record_failures{1};  // the first record fails: the pack is tried again
  cs.SetPackMeta(PackMeta{[] {
                            static std::atomic<uint64_t> next{1000};
                            return Result<uint64_t>(next++);
                          },
                          [&](uint64_t pack, uint32_t len, const std::vector<PackEntry>& members) -> Status {
                            if (record_failures-- > 0) return Status::Err(EIO, "metadata down");
                            std::lock_guard<std::mutex> l(mu);
                            for (const auto& m : members) where[m.slice] = PackRef{pack, len, m.off};
                            return Status::OK();
                          }});
  ASSERT_TRUE(cs.StartWriteback(dir_, 2).ok());
  store->HoldPuts(true);
  std::map<uint64_t, std::string> files;
  for (uint64_t id = 1; id <= 30; ++id) {
    files[id] = RandomBytes(100 + id * 300, static_cast<uint32_t>(id));
    auto w = cs.NewSliceWriter(id);
    ASSERT_TRUE(w->Write(0, files[id]));
    ASSERT_TRUE(w->Finish().ok());
    ASSERT_TRUE(cs.PackableSize(static_cast<uint32_t>(files[id].size())));
    cs.MarkStaged(id, /*packable=*/id != 30);  // 30: its record does not allow packing
  }
  EXPECT_FALSE(cs.PackableSize(20 << 10));
  store->HoldPuts(false);
  EXPECT_EQ(cs.DrainWriteback(std::chrono::seconds(30), {}).staged_blocks, 0u);
  auto st = cs.stats();
  EXPECT_GE(st.packs, 1u);
  EXPECT_LE(st.packs, 3u);  // they were all ready together; a few at most
  EXPECT_EQ(st.packed_blocks, 29u);
  EXPECT_TRUE(store->Has(BlockKey("vol", 30, 0, static_cast<uint32_t>(files[30].size()))));
  for (uint64_t id = 1; id < 30; ++id) {
    EXPECT_FALSE(store->Has(BlockKey("vol", id, 0, static_cast<uint32_t>(files[id].size()))));
    ASSERT_EQ(where.count(id), 1u) << id;
  }
  // Every packed slice reads back from its pack, whole and in pieces.
  int gets_before = store->gets;
  for (uint64_t id = 1; id < 30; ++id) {
    uint32_t size = static_cast<uint32_t>(files[id].size());
    std::string back(size, '\0');
    ASSERT_TRUE(cs.ReadSlice(id, size, 0, size, back.data(), nullptr, where[id]).ok());
    EXPECT_EQ(back, files[id]);
    std::string piece(50, '\0');
    ASSERT_TRUE(cs.ReadSlice(id, size, 40, 50, piece.data(), nullptr, where[id]).ok());
    EXPECT_EQ(piece, files[id].substr(40, 50));
  }
  EXPECT_GT(store->gets, gets_before);
  // A location past the pack's end is an error, never other bytes.
  PackRef bad = where[1];
  bad.pack_len = 10;
  std::string junk(100, '\0');
  EXPECT_FALSE(cs.ReadSlice(1, static_cast<uint32_t>(files[1].size()), 0, 100, junk.data(), nullptr, bad).ok());
  // Dead packs are deleted by key.
  ASSERT_TRUE(cs.DeletePack(where[1].pack, where[1].pack_len).ok());
  EXPECT_FALSE(store->Has(PackKey("vol", where[1].pack, where[1].pack_len)));
}

// A block another client staged and still uploads is waited for; one staged by a client
// that stopped is an error saying where it is; one staged by nobody is missing.
TEST_F(WritebackTest, ReadsWaitForBlocksAnotherClientStaged) {
  auto fake = std::make_unique<FakeStore>();
  FakeStore* store = fake.get();
  StoreConfig cfg;
  cfg.volume = "vol";
  cfg.block_size = 64 << 10;
  CachedStore cs(std::move(fake), cfg);
  std::atomic<int> asked{0};
  std::atomic<bool> alive{true};
  const std::string key = BlockKey("vol", 9, 0, 1000);
  const std::string bytes = RandomBytes(1000, 9);
  cs.SetStagedCheck([&](uint64_t id) {
    StagedInfo info;
    if (id != 9) return info;
    info.staged = true;
    info.writer_alive = alive;
    info.where = "host h (session 5)";
    if (++asked == 3) store->Set(key, bytes);  // the upload lands meanwhile
    return info;
  });
  std::string got(1000, '\0');
  ASSERT_TRUE(cs.ReadSlice(9, 1000, 0, 1000, got.data()).ok());
  EXPECT_EQ(got, bytes);
  EXPECT_EQ(asked.load(), 3);
  EXPECT_EQ(cs.stats().staged_waits, 1u);

  alive = false;
  Status st = cs.ReadSlice(10, 1000, 0, 1000, got.data());  // not staged: missing
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("missing"), std::string::npos) << st.message();
  cs.SetStagedCheck([](uint64_t) { return StagedInfo{true, false, "host h (session 5)"}; });
  st = cs.ReadSlice(11, 1000, 0, 1000, got.data());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("staged for write-back on host h (session 5), whose client is not running"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tierfs
