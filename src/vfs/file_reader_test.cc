// FileReader over the in-memory metadata engine and the fake object store: slice maps,
// holes, shadowing, the readahead window and the generation contract of the map cache; and
// compaction as readers see it (the same bytes, a reader holding the old map, a conflict).
#include "vfs/file_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "chunk/cached_store.h"
#include "chunk/fake_store_for_test.h"
#include "chunk/read_pieces.h"
#include "chunk/slice_writer.h"
#include "common/clock.h"
#include "meta/kv_engine.h"
#include "meta/hook_engine_for_test.h"
#include "meta/meta.h"
#include "vfs/compactor.h"
#include "vfs/inode_state.h"

namespace tierfs {
namespace {

using testing::FakeStore;
using testing::RandomBytes;

constexpr uint32_t kBlock = 64 << 10;

std::atomic<int> g_n{0};

// Equality of file data, reporting the first difference instead of both whole strings.
::testing::AssertionResult SameData(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto byte = [](const std::string& s, size_t i) {
    return i < s.size() ? std::to_string(static_cast<unsigned char>(s[i])) : std::string("end");
  };
  return ::testing::AssertionFailure() << "sizes " << got.size() << " and " << want.size() << ", first difference at "
                                       << i << ": got " << byte(got, i) << ", want " << byte(want, i);
}

using testing::HookEngine;

class FileReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "file_reader_test_" + std::to_string(g_n++);
    auto inner = OpenKvEngine("mem://" + name_);
    ASSERT_TRUE(inner.ok());
    auto engine = std::make_unique<HookEngine>(std::move(*inner));
    engine_ = engine.get();
    FormatRecord rec;
    rec.name = name_;
    rec.storage = "mem";
    rec.bucket = name_;
    rec.block_size = kBlock;
    ASSERT_TRUE(Meta::Format(engine.get(), rec, false).ok());
    auto m = Meta::Open(std::move(engine));
    ASSERT_TRUE(m.ok());
    meta_ = std::move(*m);
    ASSERT_TRUE(meta_->NewSession(SessionInfo{}).ok());

    auto fake = std::make_unique<FakeStore>();
    fake_ = fake.get();
    StoreConfig cfg;
    cfg.volume = name_;
    cfg.block_size = kBlock;
    cfg.cache_bytes = 64 << 20;
    cfg.buffer_bytes = 16 << 20;
    store_ = std::make_unique<CachedStore>(std::move(fake), cfg);

    auto made = meta_->Mknod(Ctx::Root(), kRootIno, "f", S_IFREG | 0644, 0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ino_ = made->first;
    st_ = std::make_shared<InodeState>(ino_, meta_.get());
    reader_ = std::make_unique<FileReader>(st_, store_.get());
  }
  void TearDown() override {
    reader_.reset();
    st_.reset();
    store_.reset();  // waits for prefetches
  }

  // Uploads `data` as a new slice and commits it at file offset `off` (within one chunk),
  // as a writer of another client would: this client's state is not told.
  void Commit(uint64_t off, const std::string& data) {
    uint32_t chunk = static_cast<uint32_t>(off >> kChunkBits);
    ASSERT_LE((off & (kChunkSize - 1)) + data.size(), kChunkSize);
    auto id = meta_->NewSliceId();
    ASSERT_TRUE(id.ok());
    auto w = store_->NewSliceWriter(*id);
    ASSERT_TRUE(w->Write(0, data));
    ASSERT_TRUE(w->Finish().ok());
    SliceRecord rec;
    rec.pos = static_cast<uint32_t>(off & (kChunkSize - 1));
    rec.id = *id;
    rec.size = static_cast<uint32_t>(data.size());
    rec.len = rec.size;
    Status s = meta_->WriteSlice(ino_, chunk, rec, off + data.size(), NowNanos());
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Reads as the FUSE adapter does: pieces of cached blocks and of the scratch buffer,
  // joined here.
  std::string ReadPieced(uint64_t off, size_t n, ReadPieces* pieces) {
    std::string scratch(n, '\xee');
    pieces->Clear();
    Status s = reader_->Read(off, n, scratch.data(), pieces);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::string out;
    for (const ReadPiece& p : pieces->pieces()) out.append(p.data, p.len);
    return out;
  }
  // Both ways of reading must give the same bytes.
  std::string ReadBoth(uint64_t off, size_t n) {
    ReadPieces pieces;
    std::string pieced = ReadPieced(off, n, &pieces);
    std::string copied = Read(off, n);
    EXPECT_TRUE(SameData(pieced, copied)) << "pieced read differs at " << off << " +" << n;
    return copied;
  }
  // Takes the file's attributes into the state (drops its maps, bumps the generation).
  void Refresh() { ASSERT_TRUE(st_->Refresh().ok()); }
  std::string Read(uint64_t off, size_t n) {
    std::string buf(n, '\xee');  // not zeros: a hole must be written as zeros
    Status s = reader_->Read(off, n, buf.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    return buf;
  }
  // Waits until the fake store has served `n` gets (prefetches run in the background),
  // then a little longer to catch any beyond.
  int GetsSettleAt(int n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (fake_->gets.load() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return fake_->gets.load();
  }

  std::string name_;
  HookEngine* engine_ = nullptr;  // owned by meta_
  std::unique_ptr<Meta> meta_;
  FakeStore* fake_ = nullptr;  // owned by store_
  std::unique_ptr<CachedStore> store_;
  Ino ino_ = 0;
  std::shared_ptr<InodeState> st_;
  std::unique_ptr<FileReader> reader_;
};

TEST_F(FileReaderTest, ReadsAcrossChunkAndSliceBoundaries) {
  const uint64_t boundary = kChunkSize;
  std::string a = RandomBytes(100 << 10, 1), b = RandomBytes(100 << 10, 2), c = RandomBytes(100 << 10, 3);
  Commit(boundary - 200 * 1024, a);  // chunk 0, ends where b starts
  Commit(boundary - 100 * 1024, b);  // chunk 0, ends at the chunk's end
  Commit(boundary, c);               // chunk 1
  Refresh();
  std::string all = a + b + c;
  EXPECT_TRUE(SameData(ReadBoth(boundary - 200 * 1024, all.size()), all));
  // Odd offsets and lengths, each crossing a slice or the chunk boundary.
  for (uint64_t start : {uint64_t{7}, uint64_t{100 << 10} - 3, uint64_t{150 << 10} + 11, uint64_t{200 << 10} - 1}) {
    size_t n = std::min<size_t>(70 << 10, all.size() - start);
    EXPECT_TRUE(SameData(ReadBoth(boundary - 200 * 1024 + start, n), all.substr(start, n))) << "at " << start;
  }
  EXPECT_TRUE(SameData(ReadBoth(boundary - 1, 2), b.substr(b.size() - 1) + c.substr(0, 1)));
}

TEST_F(FileReaderTest, HolesReadAsZeros) {
  std::string a(10, 'a'), b(10 << 10, 'b');
  Commit(10, a);
  Commit(100 << 10, b);
  Commit(kChunkSize + kChunkSize / 2, "far");  // chunk 1; chunk 0's tail is a gap
  Refresh();
  std::string want(200 << 10, '\0');
  want.replace(10, a.size(), a);
  want.replace(100 << 10, b.size(), b);
  EXPECT_TRUE(SameData(ReadBoth(0, want.size()), want));
  // The gap at the end of chunk 0 and the start of chunk 1.
  EXPECT_TRUE(SameData(ReadBoth(kChunkSize - 5, 10), std::string(10, '\0')));
  // Past the last record of the last chunk.
  EXPECT_TRUE(SameData(ReadBoth(kChunkSize + kChunkSize / 2 + 3, 100), std::string(100, '\0')));

  // A hole record (a truncation, then the file grown again) reads as zeros too.
  Attr in;
  in.length = 20;
  ASSERT_TRUE(meta_->SetAttr(Ctx::Root(), ino_, kSetSize, in).ok());
  in.length = 200 << 10;
  ASSERT_TRUE(meta_->SetAttr(Ctx::Root(), ino_, kSetSize, in).ok());
  Refresh();
  std::string shrunk(200 << 10, '\0');
  shrunk.replace(10, a.size(), a);
  EXPECT_TRUE(SameData(ReadBoth(0, shrunk.size()), shrunk));
}

TEST_F(FileReaderTest, LaterSlicesShadowEarlierOnes) {
  Commit(0, std::string(300 << 10, 'a'));
  Commit(100 << 10, std::string(100 << 10, 'b'));
  Commit(150 << 10, std::string(100 << 10, 'c'));
  Commit(160 << 10, std::string(10, 'd'));
  Refresh();
  std::string want = std::string(100 << 10, 'a') + std::string(50 << 10, 'b') + std::string(10 << 10, 'c') +
                     std::string(10, 'd') + std::string((90 << 10) - 10, 'c') + std::string(50 << 10, 'a');
  EXPECT_TRUE(SameData(ReadBoth(0, 300 << 10), want));
  EXPECT_TRUE(SameData(ReadBoth((160 << 10) - 2, 14), "cc" + std::string(10, 'd') + "cc"));
}

// A block held in the memory cache reaches the reader as a window of the cached block, not
// a copy; a ranged read of an uncached block lands in the scratch buffer.
TEST_F(FileReaderTest, CachedBlocksAreReferencedNotCopied) {
  const std::string data = RandomBytes(3 * kBlock, 9);
  Commit(0, data);
  Refresh();
  ReadPieces pieces;
  // 1 KiB of an uncached block: a ranged GET into scratch (joined with nothing else).
  EXPECT_TRUE(SameData(ReadPieced(100, 1024, &pieces), data.substr(100, 1024)));
  ASSERT_EQ(pieces.pieces().size(), 1u);
  EXPECT_EQ(pieces.pieces()[0].hold, nullptr);
  // Reads of half a block fetch the whole block into the memory cache; a read across two
  // cached blocks is two windows.
  ASSERT_TRUE(SameData(Read(0, kBlock / 2), data.substr(0, kBlock / 2)));
  ASSERT_TRUE(SameData(Read(kBlock + 100, kBlock / 2), data.substr(kBlock + 100, kBlock / 2)));
  EXPECT_TRUE(SameData(ReadPieced(kBlock - 10, 20, &pieces), data.substr(kBlock - 10, 20)));
  ASSERT_EQ(pieces.pieces().size(), 2u);
  for (const ReadPiece& p : pieces.pieces()) {
    ASSERT_NE(p.hold, nullptr);
    EXPECT_GE(p.data, p.hold->data());
    EXPECT_LE(p.data + p.len, p.hold->data() + p.hold->size());
  }
  // The window keeps its block alive after the cache lets it go.
  std::shared_ptr<const std::string> held = pieces.pieces()[0].hold;
  store_->cache()->Clear();
  EXPECT_EQ(std::string(pieces.pieces()[0].data, pieces.pieces()[0].len), data.substr(kBlock - 10, 10));
}

// The window starts at 2 blocks on the second read of a stream and doubles with every
// read after, so the blocks fetched grow 1, 3, 3, 5, 9... (one-block reads: after the
// k-th, blocks [0, k + 2^(k-1)) are fetched). A seek starts over. The seeks here jump
// about 8 MiB, well past the slack within which READs arriving out of order still count
// as the stream (kStreamSlack in file_reader.cc), so the test does not depend on it.
TEST_F(FileReaderTest, ReadaheadWindowGrowsForASequentialStreamAndResetsOnASeek) {
  const std::string data = RandomBytes(16 << 20, 7);  // 256 blocks
  Commit(0, data);
  Refresh();
  ASSERT_EQ(st_->length, data.size());
  fake_->gets = 0;
  int want = 0;
  for (int k = 1; k <= 5; ++k) {
    uint64_t off = static_cast<uint64_t>(k - 1) * kBlock;
    ASSERT_TRUE(SameData(Read(off, kBlock), data.substr(off, kBlock)));
    want = k == 1 ? 1 : k + (1 << (k - 1));
    EXPECT_EQ(GetsSettleAt(want), want) << "after sequential read " << k;
  }
  EXPECT_EQ(fake_->ranged_gets.load(), 0);

  // A seek to a block not fetched yet: read on its own, no readahead.
  const uint64_t seek = 8 << 20;
  ASSERT_TRUE(SameData(Read(seek, kBlock), data.substr(seek, kBlock)));
  want += 1;
  EXPECT_EQ(GetsSettleAt(want), want) << "a read after a seek prefetched";
  // The stream that follows starts again with a 2-block window.
  ASSERT_TRUE(SameData(Read(seek + kBlock, kBlock), data.substr(seek + kBlock, kBlock)));
  want += 1 + 2;
  EXPECT_EQ(GetsSettleAt(want), want) << "the window did not start over";

  // Near the end of the file the window is clipped to it: blocks 252 (a seek), 253 with
  // 254 and 255 prefetched, then nothing more to fetch.
  for (uint64_t block = 252; block < 256; ++block) {
    ASSERT_TRUE(SameData(Read(block * kBlock, kBlock), data.substr(block * kBlock, kBlock)));
  }
  want += 4;
  EXPECT_EQ(GetsSettleAt(want), want);
}

// The kernel sends several READs of a stream at once and FUSE workers serve them in any
// order: a read just behind or ahead of the stream continues it instead of starting over.
TEST_F(FileReaderTest, ReadsOfAStreamOutOfOrderKeepTheWindow) {
  const std::string data = RandomBytes(4 << 20, 8);  // 64 blocks
  Commit(0, data);
  Refresh();
  fake_->gets = 0;
  for (uint64_t block : {0, 1, 3, 2, 4}) {
    ASSERT_TRUE(SameData(Read(block * kBlock, kBlock), data.substr(block * kBlock, kBlock)));
  }
  // 0, 1: blocks [0, 4) fetched; 3 moves the stream on (window 4: [0, 8)); 2 is behind it
  // (nothing new); 4 moves it on again (window 8: [0, 13)). Starting over at every
  // out-of-order read would have fetched [0, 5).
  EXPECT_EQ(GetsSettleAt(13), 13);
}

// The map cache: a map stays cached until the generation moves, and a map read while it
// moved (a commit of this client's overlapped the read) serves that read but is not kept.
TEST_F(FileReaderTest, AStaleMapIsNotCachedAcrossAGenerationBump) {
  const std::string v1(100 << 10, '1'), v2(100 << 10, '2'), v3(100 << 10, '3');
  Commit(0, v1);
  Refresh();
  EXPECT_TRUE(SameData(Read(0, v1.size()), v1));
  // Changed behind the state's back: the cached map still names the old slice.
  Commit(0, v2);
  EXPECT_TRUE(SameData(Read(0, v1.size()), v1)) << "the map was not cached";
  Refresh();
  EXPECT_TRUE(SameData(Read(0, v2.size()), v2));

  // Now the read loads the map, and before it uses it, this client commits v3 (the
  // writer's hook bumps the generation).
  Refresh();
  engine_->AfterNextRead([&] {
    Commit(0, v3);
    Attr after = *meta_->GetAttr(ino_);
    std::lock_guard<std::mutex> l(st_->mu);
    st_->RefreshLocked(&after, 0, InodeState::Cause::kCommit);
  });
  EXPECT_TRUE(SameData(Read(0, v2.size()), v2)) << "the read did not overlap the commit";
  EXPECT_TRUE(SameData(Read(0, v3.size()), v3)) << "the map read before the commit was cached";
}

// An open keeps the cached maps unless the file shows changes this client has not seen.
TEST_F(FileReaderTest, AnOpenDropsTheMapsOnlyForUnseenChanges) {
  const std::string v1(10 << 10, '1'), v2(10 << 10, '2');
  Commit(0, v1);
  Refresh();
  EXPECT_TRUE(SameData(Read(0, v1.size()), v1));
  auto opened = [&] {
    uint64_t gen = st_->Gen();
    Attr a = *meta_->GetAttr(ino_);
    std::lock_guard<std::mutex> l(st_->mu);
    return st_->RefreshLocked(&a, gen, InodeState::Cause::kOpen);
  };
  EXPECT_FALSE(opened());
  int scans = engine_->scans.load();
  EXPECT_TRUE(SameData(Read(0, v1.size()), v1));
  EXPECT_EQ(engine_->scans.load(), scans) << "the open dropped the map with nothing new to see";
  Commit(0, v2);  // another client's write
  EXPECT_TRUE(opened());
  EXPECT_TRUE(SameData(Read(0, v2.size()), v2));
  EXPECT_GT(engine_->scans.load(), scans);
  EXPECT_FALSE(opened()) << "the change counts as seen after the open that saw it";
}

// ---- compaction, as readers see it (vfs/compactor.h) ----------------------------------

class CompactionTest : public FileReaderTest {
 protected:
  // Commits a base slice and `n` overwrites at random places; returns the file's bytes.
  std::string Fragment(int n, uint32_t seed) {
    std::string model = RandomBytes(300 << 10, seed);
    Commit(0, model);
    std::mt19937 rng(seed);
    for (int i = 0; i < n; ++i) {
      uint32_t len = 8192 + rng() % 12000, off = rng() % (static_cast<uint32_t>(model.size()) - len);
      std::string piece = RandomBytes(len, seed * 1000 + i);
      Commit(off, piece);
      model.replace(off, len, piece);
    }
    return model;
  }
  std::unique_ptr<Compactor> NewCompactor(int64_t grace_ns) {
    CompactorOptions o;
    o.release_grace_ns = grace_ns;
    return std::make_unique<Compactor>(meta_.get(), store_.get(), nullptr, o);
  }
  std::vector<uint64_t> DeletedByCleanup() {
    std::vector<uint64_t> deleted;
    meta_->StartBackground([&](uint64_t id, uint32_t size) {
      deleted.push_back(id);
      return store_->DeleteSlice(id, size);
    });
    meta_->StopBackground();
    EXPECT_TRUE(meta_->RunCleanupOnce().ok());
    return deleted;
  }
};

TEST_F(CompactionTest, AFragmentedChunkReadsTheSameAsOneSlice) {
  std::string model = Fragment(30, 7);
  Refresh();
  ASSERT_TRUE(SameData(ReadBoth(0, model.size()), model));
  auto c = NewCompactor(3'600'000'000'000);
  auto stats = c->CompactFile(ino_, /*force=*/true);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->compacted, 1u);
  EXPECT_EQ(stats->records_before, 31u);
  EXPECT_EQ(stats->records_after, 1u);
  EXPECT_EQ(stats->live_bytes, model.size());
  EXPECT_GT(stats->dead_bytes, 200u << 10);
  EXPECT_EQ(meta_->ReadChunk(ino_, 0)->size(), 1u);
  Refresh();
  ASSERT_TRUE(SameData(ReadBoth(0, model.size()), model));
  // The replaced slices wait out the grace before their blocks go.
  EXPECT_TRUE(DeletedByCleanup().empty());
  // Compacting again finds nothing to do.
  EXPECT_EQ(c->CompactFile(ino_, true)->compacted, 0u);
}

TEST_F(CompactionTest, AReaderHoldingTheOldMapReadsAgainWhenItsBlocksAreGone) {
  std::string model = Fragment(10, 8);
  Refresh();
  ASSERT_TRUE(SameData(Read(0, model.size()), model));  // the reader caches the old map
  auto c = NewCompactor(0);
  ASSERT_EQ(c->CompactFile(ino_, true)->compacted, 1u);
  EXPECT_EQ(DeletedByCleanup().size(), 11u);  // the old blocks leave the store and the cache
  ASSERT_TRUE(SameData(Read(0, model.size()), model));
}

TEST_F(CompactionTest, ATruncationDuringTheCopyMakesTheSwapGiveUp) {
  std::string model = Fragment(5, 9);
  auto c = NewCompactor(0);
  size_t objects = fake_->Count();
  int puts = fake_->puts.load();
  fake_->HoldPuts(true);
  Result<CompactStats> got = Status::Err(EINVAL, "not run");
  std::thread t([&] { got = c->CompactFile(ino_, true); });
  // Until the copy's first block waits to be put: the records are read, the swap is ahead.
  for (int i = 0; i < 1000 && fake_->puts.load() == puts; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Attr a;
  a.length = 1000;
  ASSERT_TRUE(meta_->SetAttr(Ctx::Root(), ino_, kSetSize, a).ok());
  fake_->HoldPuts(false);
  t.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->compacted, 0u);
  EXPECT_EQ(got->conflicts, 1u);
  EXPECT_EQ(fake_->Count(), objects);  // the copy's blocks were deleted
  Refresh();
  EXPECT_TRUE(SameData(Read(0, 1000), model.substr(0, 1000)));
}

}  // namespace
}  // namespace tierfs
