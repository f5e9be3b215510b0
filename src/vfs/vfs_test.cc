// Vfs over the in-memory engine and store: the data path without FUSE.
#include "vfs/vfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "chunk/cached_store.h"
#include "meta/kv_engine.h"
#include "meta/hook_engine_for_test.h"
#include "object/object_store.h"

namespace tierfs {
namespace {

std::atomic<int> g_n{0};

using testing::HookEngine;

// Holds the caller of the next layout read until Resume(), through the engine's hook.
class Pause {
 public:
  void Arm(HookEngine* engine) {
    engine->AfterNextRead([this] {
      std::unique_lock<std::mutex> l(mu_);
      paused_ = true;
      cv_.notify_all();
      cv_.wait(l, [&] { return !paused_; });
    });
  }
  void WaitPaused() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return paused_; });
  }
  void Resume() {
    std::lock_guard<std::mutex> l(mu_);
    paused_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;
};

class VfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "vfs_test_" + std::to_string(g_n++);
    const std::string& name = name_;
    auto inner = OpenKvEngine("mem://" + name);
    ASSERT_TRUE(inner.ok());
    auto engine = std::make_unique<HookEngine>(std::move(*inner));
    engine_ = engine.get();
    FormatRecord rec;
    rec.name = name;
    rec.storage = "mem";
    rec.bucket = name;
    rec.block_size = 64 << 10;
    ASSERT_TRUE(Meta::Format(engine.get(), rec, false).ok());
    auto m = Meta::Open(std::move(engine));
    ASSERT_TRUE(m.ok());
    meta_ = std::move(*m);
    ASSERT_TRUE(meta_->NewSession(SessionInfo{}).ok());
    store_ = NewStore();
    vfs_ = std::make_unique<Vfs>(meta_.get(), store_.get(), VfsOptions{});
  }
  std::unique_ptr<CachedStore> NewStore() {
    auto store = CreateObjectStore("mem", name_);
    EXPECT_TRUE(store.ok());
    StoreConfig cfg;
    cfg.volume = name_;
    cfg.block_size = 64 << 10;
    cfg.cache_bytes = 8 << 20;
    cfg.buffer_bytes = 1 << 20;
    return std::make_unique<CachedStore>(std::move(*store), cfg);
  }
  void TearDown() override { vfs_.reset(); }

  uint64_t Create(const std::string& name) {
    auto r = vfs_->Create(ctx_, kRootIno, name, 0644, O_RDWR);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r->second.fh;
  }
  std::string ReadAll(uint64_t fh, uint64_t off, size_t n) {
    std::string buf(n, '\0');
    auto r = vfs_->Read(fh, off, n, buf.data());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    buf.resize(r.ok() ? *r : 0);
    return buf;
  }

  Ctx ctx_ = Ctx::Root();
  std::string name_;
  HookEngine* engine_ = nullptr;  // owned by meta_
  std::unique_ptr<Meta> meta_;
  std::unique_ptr<CachedStore> store_;
  std::unique_ptr<Vfs> vfs_;
};

// The first open of a file after a mount reads its attributes and the map of its first
// chunk in one transaction; the map must survive the refresh that open makes (everything
// is unseen to a fresh client), or every first read pays a second transaction for it.
TEST_F(VfsTest, TheFirstOpenAfterAMountKeepsTheMapItRead) {
  uint64_t fh = Create("f");
  std::string data(100 << 10, 'x');
  ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(vfs_->Release(fh).ok());
  auto e = vfs_->Lookup(ctx_, kRootIno, "f");
  ASSERT_TRUE(e.ok());
  // Another client of the same session's engine: a mount that has seen nothing yet.
  auto store = NewStore();
  Vfs fresh(meta_.get(), store.get(), VfsOptions{});
  int before = engine_->scans.load();
  auto o = fresh.Open(ctx_, e->ino, O_RDONLY);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(engine_->scans.load(), before + 1);  // attributes and chunk 0's map
  std::string got(data.size(), '\0');
  auto r = fresh.Read(o->fh, 0, got.size(), got.data());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, data);
  EXPECT_EQ(engine_->scans.load(), before + 1);  // the read used the map the open read
  ASSERT_TRUE(fresh.Release(o->fh).ok());
}

TEST_F(VfsTest, RandomWritesMatchAModel) {
  uint64_t fh = Create("f");
  std::string model;
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    uint64_t off = rng() % (600 << 10);
    size_t len = 1 + rng() % (100 << 10);
    std::string data(len, '\0');
    for (auto& c : data) c = static_cast<char>('a' + rng() % 26);
    ASSERT_TRUE(vfs_->Write(fh, off, data.data(), len).ok());
    if (model.size() < off + len) model.resize(off + len, '\0');
    model.replace(off, len, data);
    if (i % 50 == 0) {
      ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
    }
    if (i % 37 == 0) {
      // read-your-writes before any close
      std::string got = ReadAll(fh, 0, model.size() + 10);
      ASSERT_EQ(got, model);
    }
  }
  ASSERT_TRUE(vfs_->Release(fh).ok());
  auto attr = vfs_->Lookup(ctx_, kRootIno, "f");
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->attr.length, model.size());
  auto o = vfs_->Open(ctx_, attr->ino, O_RDONLY);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(ReadAll(o->fh, 0, model.size()), model);
}

TEST_F(VfsTest, TruncateThenExtendReadsZeros) {
  uint64_t fh = Create("f");
  std::string data(200 << 10, 'x');
  ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
  auto e = vfs_->Lookup(ctx_, kRootIno, "f");
  Attr in;
  in.length = 1000;
  ASSERT_TRUE(vfs_->SetAttr(ctx_, e->ino, kSetSize, in, fh).ok());
  in.length = 100 << 10;
  ASSERT_TRUE(vfs_->SetAttr(ctx_, e->ino, kSetSize, in, fh).ok());
  std::string got = ReadAll(fh, 0, 200 << 10);
  ASSERT_EQ(got.size(), 100u << 10);
  EXPECT_EQ(got.substr(0, 1000), std::string(1000, 'x'));
  EXPECT_EQ(got.substr(1000), std::string((100 << 10) - 1000, '\0'));
}

TEST_F(VfsTest, CopyFileRangeAndHoles) {
  uint64_t a = Create("a");
  std::string data(150 << 10, 'q');
  ASSERT_TRUE(vfs_->Write(a, 10, data.data(), data.size()).ok());
  uint64_t b = Create("b");
  auto n = vfs_->CopyFileRange(ctx_, a, 0, b, 5, 200 << 10);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, data.size() + 10);
  std::string got = ReadAll(b, 0, 1 << 20);
  ASSERT_EQ(got.size(), data.size() + 15);
  EXPECT_EQ(got.substr(0, 15), std::string(15, '\0'));
  EXPECT_EQ(got.substr(15), data);
}

TEST_F(VfsTest, WriteBufferStaysBounded) {
  uint64_t fh = Create("big");
  std::string mb(1 << 20, 'z');
  uint64_t peak = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(vfs_->Write(fh, static_cast<uint64_t>(i) << 20, mb.data(), mb.size()).ok());
    peak = std::max(peak, store_->buffered_bytes());
  }
  // The limit is 1 MiB; one block in flight per writer may exceed it briefly.
  EXPECT_LE(peak, (1u << 20) + (64u << 10) * 2 + mb.size());
  ASSERT_TRUE(vfs_->Release(fh).ok());
  EXPECT_EQ(store_->buffered_bytes(), 0u);
}

TEST_F(VfsTest, LayoutJsonNamesSlices) {
  uint64_t fh = Create("f");
  std::string data(100 << 10, 'y');
  ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
  auto e = vfs_->Lookup(ctx_, kRootIno, "f");
  auto j = vfs_->LayoutJson(e->ino);
  ASSERT_TRUE(j.ok());
  EXPECT_NE(j->find("\"length\":102400"), std::string::npos) << *j;
  EXPECT_NE(j->find("\"slices\""), std::string::npos);
}

// "tierfs.info@N" pages the layout (an xattr value is at most 64 KiB): the pages put
// together are the whole document, each slice once, chunks split across pages included.
TEST_F(VfsTest, LayoutPagesAddUpToTheWholeLayout) {
  uint64_t fh = Create("f");
  for (uint64_t i = 0; i < 120; ++i) {
    ASSERT_TRUE(vfs_->Write(fh, (i / 3) * kChunkSize + (i % 3) * 4096, "z", 1).ok());
  }
  ASSERT_TRUE(vfs_->Release(fh).ok());
  Ino ino = vfs_->Lookup(ctx_, kRootIno, "f")->ino;
  auto whole = vfs_->LayoutJson(ino);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  nlohmann::json merged;
  uint64_t from = 0;
  int pages = 0;
  for (;;) {
    auto text = vfs_->GetXattr(ctx_, ino, "tierfs.info@" + std::to_string(from));
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    ASSERT_LT(text->size(), 64u << 10);
    auto page = nlohmann::json::parse(*text);
    ++pages;
    nlohmann::json info = page["page"];
    page.erase("page");
    if (from == 0) {
      merged = page;
    } else {
      for (auto& c : page["chunks"]) {
        if (merged["chunks"].back()["index"] == c["index"]) {
          for (auto& sl : c["slices"]) merged["chunks"].back()["slices"].push_back(sl);
        } else {
          merged["chunks"].push_back(c);
        }
      }
    }
    if (!info.contains("next")) break;
    ASSERT_GT(info["next"].get<uint64_t>(), from);
    from = info["next"];
  }
  EXPECT_EQ(pages, 1) << "120 small slices fit in one page";
  EXPECT_EQ(merged, nlohmann::json::parse(*whole));
  // Pages of about 1000 bytes: many, each ending wherever the budget runs out.
  merged = nlohmann::json();
  from = 0;
  pages = 0;
  size_t slices = 0;
  for (;;) {
    auto text = vfs_->LayoutJson(ino, from, 1000);
    ASSERT_TRUE(text.ok());
    auto page = nlohmann::json::parse(*text);
    ++pages;
    for (auto& c : page["chunks"]) slices += c["slices"].size();
    if (!page["page"].contains("next")) break;
    from = page["page"]["next"];
  }
  EXPECT_GT(pages, 5);
  EXPECT_EQ(slices, 120u);
  EXPECT_EQ(vfs_->GetXattr(ctx_, ino, "tierfs.info@x").status().code(), EINVAL);
}

// The kernel sends CREATE after a lookup that found nothing; another client may have made
// the name in between. Without O_EXCL that must open the file it made, as a local file
// system would, with the permission checks and the O_TRUNC of a plain open.
TEST_F(VfsTest, CreateOfANameMadeMeanwhileOpensIt) {
  uint64_t fh = Create("shared.log");
  ASSERT_TRUE(vfs_->Write(fh, 0, "first\n", 6).ok());
  ASSERT_TRUE(vfs_->Release(fh).ok());
  auto again = vfs_->Create(ctx_, kRootIno, "shared.log", 0644, O_WRONLY | O_APPEND);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->first.attr.length, 6u);
  ASSERT_TRUE(vfs_->Write(again->second.fh, 6, "second\n", 7).ok());
  ASSERT_TRUE(vfs_->Release(again->second.fh).ok());
  auto rd = vfs_->Create(ctx_, kRootIno, "shared.log", 0644, O_RDONLY);
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  EXPECT_EQ(ReadAll(rd->second.fh, 0, 100), "first\nsecond\n");
  ASSERT_TRUE(vfs_->Release(rd->second.fh).ok());

  auto excl = vfs_->Create(ctx_, kRootIno, "shared.log", 0644, O_WRONLY | O_EXCL);
  ASSERT_FALSE(excl.ok());
  EXPECT_EQ(excl.status().code(), EEXIST);

  Ctx other;
  other.uid = other.gid = 4242;
  auto denied = vfs_->Create(other, kRootIno, "shared.log", 0644, O_WRONLY);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), EACCES);

  auto trunc = vfs_->Create(ctx_, kRootIno, "shared.log", 0644, O_RDWR | O_TRUNC);
  ASSERT_TRUE(trunc.ok()) << trunc.status().ToString();
  EXPECT_EQ(trunc->first.attr.length, 0u);
  EXPECT_EQ(ReadAll(trunc->second.fh, 0, 100), "");
  ASSERT_TRUE(vfs_->Release(trunc->second.fh).ok());

  ASSERT_TRUE(vfs_->Mkdir(ctx_, kRootIno, "dir", 0755).ok());
  auto dir = vfs_->Create(ctx_, kRootIno, "dir", 0644, O_RDONLY);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), EISDIR);
}

// Without a mount (sync, the gateway) no FORGET ever drops a file's state: closed files
// keep at most kIdleStates states, and a file whose state went is read right again; an
// open file with writes not yet committed keeps its state through the churn.
TEST_F(VfsTest, StatesOfClosedFilesStayBoundedWithoutAMount) {
  uint64_t keep = Create("keep");
  ASSERT_TRUE(vfs_->Write(keep, 0, "kept", 4).ok());
  const int n = static_cast<int>(Vfs::kIdleStates) + 2000;
  for (int i = 0; i < n; ++i) {
    uint64_t fh = Create("f" + std::to_string(i));
    std::string data = std::to_string(i);
    ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
    ASSERT_TRUE(vfs_->Release(fh).ok());
  }
  EXPECT_LE(vfs_->inode_states(), Vfs::kIdleStates + 1);
  EXPECT_GE(vfs_->inode_states(), Vfs::kIdleStates);
  EXPECT_EQ(ReadAll(keep, 0, 10), "kept");
  for (int i : {0, n / 2, n - 1}) {
    auto e = vfs_->Lookup(ctx_, kRootIno, "f" + std::to_string(i));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto o = vfs_->Open(ctx_, e->ino, O_RDONLY);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(ReadAll(o->fh, 0, 20), std::to_string(i));
    ASSERT_TRUE(vfs_->Release(o->fh).ok());
  }
  ASSERT_TRUE(vfs_->Release(keep).ok());
}

// The kernel closes a file and sends RELEASE later, on another thread; by then the next
// open may already hold the flock. Releasing the old handle must drop only its own lock.
TEST_F(VfsTest, LateReleaseOfAClosedFileKeepsTheNextHoldersFlock) {
  uint64_t first = Create("shared.log");
  ASSERT_TRUE(vfs_->Flock(first, LOCK_EX).ok());
  ASSERT_TRUE(vfs_->Flock(first, LOCK_UN).ok());
  auto again = vfs_->Open(ctx_, meta_->Lookup(ctx_, kRootIno, "shared.log")->first, O_RDWR);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(vfs_->Flock(again->fh, LOCK_EX).ok());
  ASSERT_TRUE(vfs_->Release(first).ok());  // the late RELEASE of the first open
  auto third = vfs_->Open(ctx_, meta_->Lookup(ctx_, kRootIno, "shared.log")->first, O_RDWR);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(vfs_->Flock(third->fh, LOCK_EX).code(), EAGAIN) << "the holder's flock was dropped";
  ASSERT_TRUE(vfs_->Release(again->fh).ok());
  EXPECT_TRUE(vfs_->Flock(third->fh, LOCK_EX).ok()) << "the flock outlived its file";
  ASSERT_TRUE(vfs_->Release(third->fh).ok());
}

// POSIX record locks belong to the process: closing any of its descriptors of the file
// drops them, even one that never locked.
TEST_F(VfsTest, CloseOfAnyDescriptorDropsTheProcesssRecordLocks) {
  constexpr uint64_t kProcess = 77, kOther = 78;
  uint64_t locker = Create("db");
  Ino ino = meta_->Lookup(ctx_, kRootIno, "db")->first;
  auto second = vfs_->Open(ctx_, ino, O_RDONLY);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(vfs_->SetLk(locker, kProcess, Meta::LockRange{F_WRLCK, 0, 99, 1}).ok());
  auto other = vfs_->Open(ctx_, ino, O_RDWR);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(vfs_->SetLk(other->fh, kOther, Meta::LockRange{F_WRLCK, 50, 60, 2}).code(), EAGAIN);
  ASSERT_TRUE(vfs_->Flush(second->fh, kProcess).ok());  // close(2) of the descriptor that did not lock
  EXPECT_TRUE(vfs_->SetLk(other->fh, kOther, Meta::LockRange{F_WRLCK, 50, 60, 2}).ok())
      << "the record lock survived a close by its process";
  for (uint64_t fh : {locker, second->fh, other->fh}) ASSERT_TRUE(vfs_->Release(fh).ok());
}

// A read that loads a chunk's slice map while this client commits a write to the chunk
// returns the old data (the two overlapped), but must not leave the old map cached: every
// later read would return the old data too (stale reads seen under mixed mmap, O_DIRECT
// and buffered I/O).
TEST_F(VfsTest, AReadRacingACommitDoesNotCacheTheOldLayout) {
  uint64_t fh = Create("f");
  const std::string old_data(100 << 10, 'o'), new_data(100 << 10, 'n');
  ASSERT_TRUE(vfs_->Write(fh, 0, old_data.data(), old_data.size()).ok());
  ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
  Pause pause;
  pause.Arm(engine_);
  std::string during;
  std::thread reader([&] { during = ReadAll(fh, 0, old_data.size()); });
  pause.WaitPaused();  // the reader holds the chunk's records as they were before
  ASSERT_TRUE(vfs_->Write(fh, 0, new_data.data(), new_data.size()).ok());
  ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
  pause.Resume();
  reader.join();
  EXPECT_EQ(during, old_data);
  EXPECT_EQ(ReadAll(fh, 0, new_data.size()), new_data) << "a read after the commit returned the old data";
  ASSERT_TRUE(vfs_->Release(fh).ok());
}

// The kernel's cache of a file is dropped at open only for data changes made by another
// client: dropping it for this client's own changes let a reader fault a page back in
// from before a buffered write that had marked it up to date already.
TEST_F(VfsTest, OpenDropsTheKernelCacheOnlyForAnotherClientsChanges) {
  uint64_t fh = Create("f");
  const std::string data(100 << 10, 'a');
  ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
  Ino ino = meta_->Lookup(ctx_, kRootIno, "f")->first;
  auto keep = [&]() {
    auto o = vfs_->Open(ctx_, ino, O_RDONLY);
    EXPECT_TRUE(o.ok());
    EXPECT_TRUE(vfs_->Release(o->fh).ok());
    return o->keep_cache;
  };
  EXPECT_TRUE(keep()) << "after this client's committed write";
  ASSERT_TRUE(vfs_->Write(fh, 10, "bb", 2).ok());
  EXPECT_TRUE(keep()) << "with this client's write still buffered";
  ASSERT_TRUE(vfs_->Flush(fh, 0).ok());
  Attr shrink;
  shrink.length = 50 << 10;
  ASSERT_TRUE(vfs_->SetAttr(ctx_, ino, kSetSize, shrink, fh).ok());
  EXPECT_TRUE(keep()) << "after this client's truncate";

  // Another client of the volume writes the file.
  auto engine = OpenKvEngine("mem://" + name_);
  ASSERT_TRUE(engine.ok());
  auto other_meta = Meta::Open(std::move(*engine));
  ASSERT_TRUE(other_meta.ok());
  ASSERT_TRUE((*other_meta)->NewSession(SessionInfo{}).ok());
  auto other_store = NewStore();
  {
    Vfs other(other_meta->get(), other_store.get(), VfsOptions{});
    auto o = other.Open(ctx_, ino, O_RDWR);
    ASSERT_TRUE(o.ok());
    ASSERT_TRUE(other.Write(o->fh, 0, "zz", 2).ok());
    ASSERT_TRUE(other.Release(o->fh).ok());
  }
  EXPECT_FALSE(keep()) << "after another client's write";
  EXPECT_TRUE(keep()) << "once this client has seen it";
  EXPECT_EQ(ReadAll(fh, 0, 3), "zza");
  ASSERT_TRUE(vfs_->Release(fh).ok());
}

// A close whose commit fails because another client removed the file deletes the blocks it
// uploaded for it, instead of leaving them to gc.
TEST_F(VfsTest, ACommitThatFailsDeletesTheBlocksItUploaded) {
  uint64_t fh = Create("gone");
  std::string data(300 << 10, 'x');  // 5 blocks of 64 KiB: the full ones upload at once
  ASSERT_TRUE(vfs_->Write(fh, 0, data.data(), data.size()).ok());
  auto engine = OpenKvEngine("mem://" + name_);
  ASSERT_TRUE(engine.ok());
  auto other = Meta::Open(std::move(*engine));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->NewSession(SessionInfo{}).ok());
  ASSERT_TRUE((*other)->Unlink(ctx_, kRootIno, "gone").ok());  // its inode is gone here too
  Status st = vfs_->Flush(fh, 0);
  EXPECT_EQ(st.code(), ENOENT) << st.ToString();
  auto left = store_->store()->List(name_ + "/", "", 1000);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty()) << left->size() << " objects left, first " << (*left)[0].key;
  vfs_->Release(fh).ok();
}

TEST_F(VfsTest, ReaddirStreamsTheSnapshotAndResumesWhereTheReplyWasFull) {
  // More entries than one attribute window, read in "replies" of at most 97 entries; the
  // entry a full reply refuses is the first of the next. Entries made after the listing
  // began do not show; readdirplus carries attributes, with buffered writes merged.
  const int n = 1300;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(vfs_->Mknod(ctx_, kRootIno, "e" + std::to_string(i), S_IFREG | 0644, 0).ok());
  uint64_t fh = Create("written");
  ASSERT_TRUE(vfs_->Write(fh, 0, "12345", 5).ok());  // buffered, not committed
  for (bool plus : {false, true}) {
    auto dh = vfs_->Opendir(ctx_, kRootIno);
    ASSERT_TRUE(dh.ok());
    std::set<std::string> seen;
    uint64_t off = 0;
    int calls = 0, taken_in_call = 0;
    for (bool more = true; more; ++calls) {
      taken_in_call = 0;
      more = false;
      ASSERT_TRUE(vfs_->Readdir(ctx_, *dh, off, plus, [&](const DirEntry& e, uint64_t next) {
                    if (taken_in_call == 97) {
                      more = true;  // "full": this entry goes first in the next call
                      return false;
                    }
                    ++taken_in_call;
                    EXPECT_TRUE(seen.insert(e.name).second) << e.name << " listed twice";
                    EXPECT_EQ(next, off + taken_in_call);
                    if (plus) {
                      EXPECT_NE(e.attr.mode, 0u) << e.name;
                      if (e.name == "written") {
                        EXPECT_EQ(e.attr.length, 5u);
                      }
                    }
                    return true;
                  }).ok());
      off += taken_in_call;
      if (calls == 0 && !plus) {
        ASSERT_TRUE(vfs_->Mknod(ctx_, kRootIno, "late", S_IFREG | 0644, 0).ok());
      }
    }
    // ".", "..", e*, "written", and in the second listing "late"
    const size_t entries = n + 3 + (plus ? 1 : 0);
    EXPECT_EQ(seen.size(), entries);
    EXPECT_TRUE(seen.count(".") && seen.count("..") && seen.count("written"));
    EXPECT_EQ(seen.count("late"), plus ? 1u : 0u);
    EXPECT_EQ(calls, static_cast<int>((entries + 96) / 97));
    ASSERT_TRUE(vfs_->Releasedir(*dh).ok());
  }
  vfs_->Release(fh).ok();
}

}  // namespace
}  // namespace tierfs
