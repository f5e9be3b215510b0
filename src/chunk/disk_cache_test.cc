// The disk cache on a real directory: restart, faults, eviction, locking, and the cached
// store's read path through it.
#include "chunk/disk_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "chunk/block_key.h"
#include "chunk/cache_file.h"
#include "chunk/cached_store.h"
#include "chunk/fake_store_for_test.h"
#include "chunk/slice_writer.h"
#include "common/hash.h"

namespace tierfs {
namespace {

namespace fs = std::filesystem;
using testing::FakeStore;
using testing::RandomBytes;

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tierfs-diskcache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  DiskCacheOptions Opts(uint64_t capacity = 64 << 20) {
    DiskCacheOptions o;
    o.dirs = {dir_};
    o.volume_uuid = "uuid-1";
    o.capacity = capacity;
    o.free_space_ratio = 0;
    return o;
  }
  std::shared_ptr<const std::string> Block(size_t n, uint32_t seed) {
    return std::make_shared<const std::string>(RandomBytes(n, seed));
  }
  std::string FileOf(const std::string& key) {
    uint64_t fp = Hash64(key);
    char name[40];
    snprintf(name, sizeof name, "%02x/%016lx", static_cast<unsigned>(fp & 0xff), static_cast<unsigned long>(fp));
    return dir_ + "/uuid-1/blocks/" + name;
  }
  std::string ReadRange(DiskCache& c, const std::string& key, uint32_t block_len, uint32_t off, uint32_t len,
                        bool* hit) {
    std::string out(len, '\0');
    *hit = c.Read(key, block_len, off, len, out.data());
    return out;
  }

  std::string dir_;
};

TEST_F(DiskCacheTest, StoresAndReadsRangesVerifyingSegments) {
  DiskCache c(Opts());
  ASSERT_TRUE(c.enabled());
  auto b = Block(1'000'000, 1);
  c.Put("vol/chunks/00/1_0_1000000", b);
  c.Drain();
  EXPECT_TRUE(c.Contains("vol/chunks/00/1_0_1000000"));
  bool hit = false;
  for (auto [off, len] : std::vector<std::pair<uint32_t, uint32_t>>{
           {0, 1'000'000}, {1, 10}, {65535, 2}, {65536, 65536}, {70000, 500'000}, {999'999, 1}, {0, 1}}) {
    std::string got = ReadRange(c, "vol/chunks/00/1_0_1000000", 1'000'000, off, len, &hit);
    ASSERT_TRUE(hit) << off << "+" << len;
    ASSERT_EQ(got, b->substr(off, len)) << off << "+" << len;
  }
  auto whole = c.ReadBlock("vol/chunks/00/1_0_1000000", 1'000'000);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(*whole, *b);
  // A different expected length or key is a miss, never wrong data.
  EXPECT_EQ(c.ReadBlock("vol/chunks/00/1_0_1000000", 999'999), nullptr);
  ReadRange(c, "vol/chunks/00/2_0_100", 100, 0, 100, &hit);
  EXPECT_FALSE(hit);
  struct stat st;
  ASSERT_EQ(stat(FileOf("vol/chunks/00/1_0_1000000").c_str(), &st), -1);  // dropped by the length mismatch
  DiskCacheStats s = c.stats();
  EXPECT_EQ(s.corrupt, 1u);
  EXPECT_GE(s.hits, 7u);
}

TEST_F(DiskCacheTest, FilesAreMode0600AndTheIndexSurvivesARestart) {
  std::vector<std::shared_ptr<const std::string>> blocks;
  {
    DiskCache c(Opts());
    for (uint32_t i = 0; i < 50; ++i) {
      blocks.push_back(Block(10'000 + i, i));
      c.Put("k" + std::to_string(i), blocks.back());
    }
    c.Drain();
    c.Erase("k7");
  }
  struct stat st;
  ASSERT_EQ(stat(FileOf("k3").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(stat((dir_ + "/uuid-1/clean").c_str(), &st), 0);
  DiskCache c(Opts());
  DiskCacheStats s = c.stats();
  EXPECT_EQ(s.blocks, 49u);
  for (uint32_t i = 0; i < 50; ++i) {
    auto got = c.ReadBlock("k" + std::to_string(i), 10'000 + i);
    if (i == 7) {
      EXPECT_EQ(got, nullptr);
    } else {
      ASSERT_NE(got, nullptr) << i;
      EXPECT_EQ(*got, *blocks[i]);
    }
  }
  // Another volume's folder is separate.
  DiskCacheOptions other = Opts();
  other.volume_uuid = "uuid-2";
  DiskCache c2(other);
  EXPECT_EQ(c2.stats().blocks, 0u);
  EXPECT_EQ(c2.ReadBlock("k1", 10'001), nullptr);
}

TEST_F(DiskCacheTest, DamagedFilesAreDroppedNeverReturned) {
  DiskCache c(Opts());
  auto a = Block(300'000, 1), b = Block(300'000, 2), d = Block(300'000, 3);
  c.Put("a", a);
  c.Put("b", b);
  c.Put("d", d);
  c.Drain();
  {  // a flipped byte in the data
    std::fstream f(FileOf("a"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1000, std::ios::end);
    char ch;
    f.read(&ch, 1);
    f.seekp(-1000, std::ios::end);
    ch ^= 0x20;
    f.write(&ch, 1);
  }
  ASSERT_EQ(truncate(FileOf("b").c_str(), 100'000), 0);  // truncated
  fs::copy_file(FileOf("a"), FileOf("d"), fs::copy_options::overwrite_existing);  // another block's file
  bool hit = true;
  ReadRange(c, "a", 300'000, 299'000, 100, &hit);  // the damaged segment
  EXPECT_FALSE(hit);
  ReadRange(c, "b", 300'000, 250'000, 100, &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(c.ReadBlock("d", 300'000), nullptr);
  EXPECT_EQ(c.stats().corrupt, 3u);
  EXPECT_EQ(c.stats().blocks, 0u);
  EXPECT_FALSE(c.Contains("a"));
  // Cached again, they read back fine.
  c.Put("a", a);
  c.Drain();
  auto got = c.ReadBlock("a", 300'000);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, *a);
}

TEST_F(DiskCacheTest, StaysWithinCapacityAndResistsScans) {
  DiskCacheOptions o = Opts(100 * 4096);
  o.correlated_ms = 0;  // the test's reads come within milliseconds
  DiskCache c(o);
  for (int i = 0; i < 30; ++i) c.Put("hot" + std::to_string(i), Block(4096, i));
  c.Drain();
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 30; ++i) ASSERT_NE(c.ReadBlock("hot" + std::to_string(i), 4096), nullptr);
  }
  for (int i = 0; i < 1000; ++i) {
    c.Put("scan" + std::to_string(i), Block(4096, 1000 + i));
    if (i % 50 == 0) c.Drain();
  }
  c.Drain();
  int kept = 0;
  for (int i = 0; i < 30; ++i) kept += c.Contains("hot" + std::to_string(i));
  EXPECT_EQ(kept, 30);
  DiskCacheStats s = c.stats();
  EXPECT_LE(s.bytes, 100u * 4096);
  // What the index says is what the disk holds.
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(dir_ + "/uuid-1/blocks")) files += e.is_regular_file();
  EXPECT_EQ(files, s.blocks);
}

TEST_F(DiskCacheTest, ASecondMountOfTheVolumeDoesNotShareTheDirectory) {
  DiskCache c(Opts());
  ASSERT_TRUE(c.enabled());
  DiskCache c2(Opts());
  EXPECT_FALSE(c2.enabled());
  c2.Put("x", Block(10, 1));  // a no-op, not a crash
  EXPECT_FALSE(c2.Contains("x"));
}

TEST_F(DiskCacheTest, AKilledClientLeavesNoWrongDataAndOrphansAreSwept) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    DiskCache c(Opts());
    for (int i = 0; i < 20; ++i) c.Put("k" + std::to_string(i), Block(5000, i));
    c.Drain();
    // A block written but not yet in the index, and a half-written temporary file.
    std::ofstream(FileOf("orphan")) << "x";
    std::ofstream(dir_ + "/uuid-1/tmp/partial.1") << "y";
    _exit(0);  // no destructor: as if killed
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  struct stat st;
  EXPECT_NE(stat((dir_ + "/uuid-1/clean").c_str(), &st), 0);
  DiskCacheOptions o = Opts();
  o.dirs = {dir_};
  CacheDir* raw = nullptr;
  auto d = CacheDir::Open(dir_, "uuid-1", 64 << 20, 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  raw = d->get();
  raw->WaitSweep();
  EXPECT_EQ(raw->stats().blocks, 20u);
  EXPECT_NE(stat(FileOf("orphan").c_str(), &st), 0);
  EXPECT_NE(stat((dir_ + "/uuid-1/tmp/partial.1").c_str(), &st), 0);
  uint64_t fp = Hash64("k5");
  std::string out(5000, '\0');
  ASSERT_TRUE(raw->Read(fp, "k5", 5000, 0, 5000, out.data()));
  EXPECT_EQ(out, RandomBytes(5000, 5));
}

TEST_F(DiskCacheTest, ADamagedIndexKeepsWhatPrecedesItAndSweepsTheRest) {
  {
    DiskCache c(Opts());
    for (int i = 0; i < 10; ++i) c.Put("k" + std::to_string(i), Block(3000, i));
    c.Drain();
  }
  // A torn record in the middle: the blocks recorded after it become orphans.
  std::string index = dir_ + "/uuid-1/index";
  ASSERT_EQ(fs::file_size(index), 10u * 16);
  {
    std::fstream f(index, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(6 * 16);
    f.put('X');
  }
  auto d = CacheDir::Open(dir_, "uuid-1", 64 << 20, 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  (*d)->WaitSweep();
  EXPECT_EQ((*d)->stats().blocks, 6u);
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(dir_ + "/uuid-1/blocks")) files += e.is_regular_file();
  EXPECT_EQ(files, 6u);
  int readable = 0;
  for (int i = 0; i < 10; ++i) {
    std::string key = "k" + std::to_string(i), out(3000, '\0');
    if (!(*d)->Read(Hash64(key), key, 3000, 0, 3000, out.data())) continue;
    ++readable;
    EXPECT_EQ(out, RandomBytes(3000, i));
  }
  EXPECT_EQ(readable, 6);
}

TEST_F(DiskCacheTest, AFailingDirectoryIsTakenOutOfUse) {
  DiskCacheOptions o = Opts();
  std::string bad = dir_ + "/bad";
  o.dirs = {dir_ + "/good", bad};
  DiskCache c(o);
  ASSERT_EQ(c.stats().dirs, 2);
  // Break the second directory under the running cache: its tmp/ becomes a file.
  fs::remove_all(bad + "/uuid-1/tmp");
  std::ofstream(bad + "/uuid-1/tmp") << "not a directory";
  for (int i = 0; i < 40; ++i) c.Put("k" + std::to_string(i), Block(1000, i));
  c.Drain();
  DiskCacheStats s = c.stats();
  EXPECT_EQ(s.dirs_down, 1);
  EXPECT_GT(s.blocks, 5u);  // the good one kept caching
  int served = 0;
  for (int i = 0; i < 40; ++i) {
    auto got = c.ReadBlock("k" + std::to_string(i), 1000);
    if (got) {
      ++served;
      EXPECT_EQ(*got, RandomBytes(1000, i));
    }
  }
  EXPECT_EQ(static_cast<uint64_t>(served), s.blocks);
  // A missing directory is created; one that cannot be (a file in the way) is left out.
  std::ofstream(dir_ + "/file") << "x";
  DiskCacheOptions o2 = Opts();
  o2.volume_uuid = "uuid-3";
  o2.dirs = {dir_ + "/new/deep", dir_ + "/file"};
  DiskCache c2(o2);
  EXPECT_EQ(c2.stats().dirs, 1);
}

// The cached store reads through the disk cache: after a "remount" (a new CachedStore on the
// same directory) a warm block needs no store request, even when the store is unreachable.
TEST_F(DiskCacheTest, CachedStoreServesAWarmCacheAfterRestartWithoutTheStore) {
  constexpr uint32_t kBlock = 256 << 10;
  uint32_t size = 3 * kBlock + 1000;
  std::string data = RandomBytes(size, 9);
  auto make = [&](FakeStore** fake) {
    StoreConfig cfg;
    cfg.volume = "vol";
    cfg.block_size = kBlock;
    cfg.disk = Opts();
    auto f = std::make_unique<FakeStore>();
    *fake = f.get();
    for (uint32_t i = 0; i < BlockCount(size, kBlock); ++i) {
      f->Set(BlockKey("vol", 5, i, BlockLength(size, kBlock, i)),
             data.substr(uint64_t{i} * kBlock, BlockLength(size, kBlock, i)));
    }
    return std::make_unique<CachedStore>(std::move(f), cfg);
  };
  FakeStore* fake = nullptr;
  {
    auto store = make(&fake);
    std::string out(size, '\0');
    ASSERT_TRUE(store->ReadSlice(5, size, 0, size, out.data()).ok());
    ASSERT_EQ(out, data);
    store->disk()->Drain();
    EXPECT_EQ(store->stats().disk.blocks, 4u);
  }
  auto store = make(&fake);
  fake->get_errno = EIO;
  std::string out(size, '\0');
  Status st = store->ReadSlice(5, size, 0, size, out.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out, data);
  std::string piece(100, '\0');
  ASSERT_TRUE(store->ReadSlice(5, size, kBlock + 7, 100, piece.data()).ok());
  EXPECT_EQ(piece, data.substr(kBlock + 7, 100));
  EXPECT_EQ(fake->gets.load(), 0);
}

// A block fetched from a checksumming store enters the disk cache with the checksums the
// store verified, not hashed again: the file's header is the one EncodeCacheHeader computes
// from the bytes, and a store that handed over wrong checksums would be caught by the first
// read from the disk (counted corrupt, fetched again), never served.
TEST_F(DiskCacheTest, AFetchedBlockKeepsTheChecksumsTheStoreVerified) {
  constexpr uint32_t kBlock = 256 << 10;
  const uint32_t size = kBlock + 5000;
  const std::string data = RandomBytes(size, 11);
  struct Spy : FakeStore {
    std::vector<uint32_t> lie;  // when set, the checksums GetVerified claims
    std::atomic<int> verified{0};
    Result<std::string> GetVerified(const std::string& key, std::vector<uint32_t>* sums) override {
      verified++;
      auto got = Get(key, 0, -1);
      sums->clear();
      if (got.ok()) {
        for (size_t off = 0; off < got->size(); off += kCacheSegment) {
          sums->push_back(Checksum32(std::string_view(*got).substr(off, kCacheSegment)));
        }
        if (!lie.empty()) *sums = lie;
      }
      return got;
    }
  };
  auto make = [&](Spy** spy) {
    StoreConfig cfg;
    cfg.volume = "vol";
    cfg.block_size = kBlock;
    cfg.disk = Opts();
    cfg.cache_bytes = 0;  // every read goes to the disk cache or the store
    auto f = std::make_unique<Spy>();
    *spy = f.get();
    for (uint32_t i = 0; i < 2; ++i) {
      f->Set(BlockKey("vol", 7, i, BlockLength(size, kBlock, i)), data.substr(uint64_t{i} * kBlock, BlockLength(size, kBlock, i)));
    }
    return std::make_unique<CachedStore>(std::move(f), cfg);
  };
  Spy* spy = nullptr;
  auto store = make(&spy);
  std::string out(size, '\0');
  ASSERT_TRUE(store->ReadSlice(7, size, 0, size, out.data()).ok());
  EXPECT_EQ(out, data);
  store->disk()->Drain();
  EXPECT_EQ(spy->verified.load(), 2);
  const std::string key0 = BlockKey("vol", 7, 0, kBlock);
  std::string header = EncodeCacheHeader(key0, std::string_view(data).substr(0, kBlock));
  std::string file;
  {
    std::ifstream f(FileOf(key0), std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(f), {});
  }
  ASSERT_GE(file.size(), header.size());
  EXPECT_EQ(file.substr(0, header.size()), header);

  // Wrong checksums from the store: the disk cache's own check turns them away.
  store.reset();
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  store = make(&spy);
  spy->lie.assign(4, 0x12345678u);  // block 0's four segments
  ASSERT_TRUE(store->ReadSlice(7, size, 0, kBlock, out.data()).ok());
  store->disk()->Drain();
  const int gets = spy->gets.load();
  ASSERT_TRUE(store->ReadSlice(7, size, 100, 1000, out.data()).ok());
  EXPECT_EQ(out.substr(0, 1000), data.substr(100, 1000));
  EXPECT_EQ(store->stats().disk.corrupt, 1u);
  EXPECT_GT(spy->gets.load(), gets) << "the damaged cache file was served instead of fetched again";
}

// Uploaded blocks of small files enter the disk cache; those of large files only on request.
TEST_F(DiskCacheTest, SmallWrittenBlocksEnterTheDiskCache) {
  StoreConfig cfg;
  cfg.volume = "vol";
  cfg.block_size = 64 << 10;
  cfg.disk = Opts();
  auto f = std::make_unique<FakeStore>();
  CachedStore store(std::move(f), cfg);
  auto w = store.NewSliceWriter(11);
  std::string small = RandomBytes(1000, 1);
  ASSERT_TRUE(w->Write(0, small));
  ASSERT_TRUE(w->Finish().ok());
  auto w2 = store.NewSliceWriter(12);
  std::string big = RandomBytes(64 << 10, 2);
  ASSERT_TRUE(w2->Write(0, big));
  ASSERT_TRUE(w2->Finish().ok());
  store.disk()->Drain();
  EXPECT_TRUE(store.disk()->Contains(BlockKey("vol", 11, 0, 1000)));
  EXPECT_FALSE(store.disk()->Contains(BlockKey("vol", 12, 0, 64 << 10)));
}

// The fill queue holds what the disks write in queue_seconds at their measured speed,
// within its bounds (the initial size until a write was measured).
TEST(FillQueueLimit, FollowsTheMeasuredSpeedWithinBounds) {
  DiskCacheOptions o;
  EXPECT_EQ(FillQueueLimit(o, 0), 64ull << 20);
  EXPECT_EQ(FillQueueLimit(o, 5e6), 32ull << 20);          // a slow disk: the floor
  EXPECT_EQ(FillQueueLimit(o, 50e6), uint64_t(100e6));      // 2 s of 50 MB/s
  EXPECT_EQ(FillQueueLimit(o, 3e9), 256ull << 20);         // NVMe: the ceiling
}

// Fills past the queue's limit are dropped and counted; PutNow (warm-up) never drops, and a
// block already queued is written once.
TEST_F(DiskCacheTest, FillsPastTheQueueAreCountedAndWarmUpNeverDrops) {
  DiskCacheOptions o = Opts();
  o.write_threads = 1;
  o.initial_pending_bytes = o.min_pending_bytes = o.max_pending_bytes = 1 << 20;
  DiskCache c(o);
  std::vector<std::shared_ptr<const std::string>> blocks;
  for (int i = 0; i < 40; ++i) blocks.push_back(Block(256 << 10, i));
  for (int i = 0; i < 40; ++i) c.Put("vol/chunks/00/9_" + std::to_string(i) + "_262144", blocks[i]);
  c.Drain();
  DiskCacheStats s = c.stats();
  EXPECT_GT(s.dropped_writes, 0u) << "40 fills of 256 KiB into a 1 MiB queue";
  EXPECT_EQ(s.writes + s.dropped_writes, 40u);
  EXPECT_GT(s.write_bytes_per_s, 0u);
  for (int i = 0; i < 40; ++i) c.PutNow("vol/chunks/00/9_" + std::to_string(i) + "_262144", blocks[i]);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(c.Contains("vol/chunks/00/9_" + std::to_string(i) + "_262144")) << i;
  EXPECT_EQ(c.stats().writes, 40u) << "each block written once";
  EXPECT_EQ(c.stats().dropped_writes, s.dropped_writes);
}

}  // namespace
}  // namespace tierfs
