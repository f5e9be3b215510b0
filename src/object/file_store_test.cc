#include "object/file_store.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

namespace tierfs {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed (with anything mounted on it
// detached first by its owner) when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = fs::temp_directory_path().string() + "/tierfs_file_store_XXXXXX";
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Mounts a tmpfs for the lifetime of the object (needs root / CAP_SYS_ADMIN).
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, const std::string& options) : dir_(dir) {
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~Tmpfs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  bool RemountReadOnly() {
    return mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

std::string RandomData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<std::string> Keys(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> keys;
  for (const auto& i : infos) keys.push_back(i.key);
  return keys;
}

// Every file under dir whose name starts with ".tmp.".
std::vector<std::string> TempFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename().string().starts_with(".tmp.")) out.push_back(it->path().string());
  }
  return out;
}

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/bucket";
    store_ = std::make_unique<FileStore>(root_);
    ASSERT_TRUE(store_->Init().ok());
  }
  TempDir tmp_;
  std::string root_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(FileStoreTest, PutGetHeadDelete) {
  std::string data = RandomData(100000, 1);
  ASSERT_TRUE(store_->Put("vol/chunks/1/2/obj", data).ok());
  EXPECT_TRUE(fs::is_regular_file(root_ + "/vol/chunks/1/2/obj"));

  auto whole = store_->Get("vol/chunks/1/2/obj");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, data);

  auto part = store_->Get("vol/chunks/1/2/obj", 10, 300);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(*part, data.substr(10, 300));

  auto tail = store_->Get("vol/chunks/1/2/obj", 99990, 1000);  // past the end
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, data.substr(99990));

  auto to_end = store_->Get("vol/chunks/1/2/obj", 50000);
  ASSERT_TRUE(to_end.ok());
  EXPECT_EQ(*to_end, data.substr(50000));

  auto beyond = store_->Get("vol/chunks/1/2/obj", 200000, 10);
  ASSERT_TRUE(beyond.ok());
  EXPECT_EQ(*beyond, "");

  auto zero = store_->Get("vol/chunks/1/2/obj", 5, 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, "");

  auto head = store_->Head("vol/chunks/1/2/obj");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->key, "vol/chunks/1/2/obj");
  EXPECT_EQ(head->size, data.size());
  EXPECT_GT(head->mtime_ns, 0);

  ASSERT_TRUE(store_->Delete("vol/chunks/1/2/obj").ok());
  auto gone = store_->Get("vol/chunks/1/2/obj");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), ENOENT);
  EXPECT_EQ(gone.status().message(), "object vol/chunks/1/2/obj not found in file://" + root_ + "/");
  EXPECT_EQ(store_->Head("vol/chunks/1/2/obj").status().code(), ENOENT);
  EXPECT_TRUE(store_->Delete("vol/chunks/1/2/obj").ok());  // deleting a missing object succeeds
  EXPECT_TRUE(store_->Delete("never/existed").ok());
}

TEST_F(FileStoreTest, EmptyAndOverwrittenObjects) {
  ASSERT_TRUE(store_->Put("empty", "").ok());
  auto e = store_->Get("empty");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, "");
  EXPECT_EQ(store_->Head("empty")->size, 0u);

  ASSERT_TRUE(store_->Put("k", "first version").ok());
  ASSERT_TRUE(store_->Put("k", "second").ok());
  EXPECT_EQ(*store_->Get("k"), "second");
  EXPECT_TRUE(TempFiles(root_).empty());
}

TEST_F(FileStoreTest, DirectoriesAreNotObjects) {
  ASSERT_TRUE(store_->Put("d/x", "1").ok());
  EXPECT_EQ(store_->Get("d").status().code(), ENOENT);
  EXPECT_EQ(store_->Head("d").status().code(), ENOENT);
  EXPECT_TRUE(store_->Delete("d").ok());
  EXPECT_EQ(*store_->Get("d/x"), "1");
  // A key below an object is missing, not an error.
  EXPECT_EQ(store_->Get("d/x/y").status().code(), ENOENT);
  EXPECT_TRUE(store_->Delete("d/x/y").ok());
  // ... but it cannot be written, since "d/x" is a file.
  Status st = store_->Put("d/x/y", "2");
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_NE(st.message().find("d/x/y"), std::string::npos);
}

TEST_F(FileStoreTest, InvalidKeys) {
  for (std::string key : {"", "/abs", "a//b", "a/", "a/./b", "a/../../etc/passwd", "..", ".multipart/x",
                          "a/.tmp.x", ".tmp.y"}) {
    Status st = store_->Put(key, "x");
    EXPECT_EQ(st.code(), EINVAL) << "key '" << key << "'";
    EXPECT_EQ(store_->Get(key).status().code(), EINVAL) << key;
    EXPECT_EQ(store_->Delete(key).code(), EINVAL) << key;
  }
  // Leading dots are otherwise fine, and .multipart is only reserved at the top.
  EXPECT_TRUE(store_->Put(".hidden/x", "x").ok());
  EXPECT_TRUE(store_->Put("a/.multipart", "x").ok());
}

// Checks List against a straightforward filter over the sorted set of keys, for many
// combinations of prefix, start_after and limit, including pagination.
TEST_F(FileStoreTest, ListMatchesSortedKeyOrder) {
  // Names chosen so that directory-first traversal would be wrong: '-' and '.' sort before
  // '/', and "a" is both an object's prefix and a directory's name.
  std::set<std::string> keys = {"a-b",   "a.x",     "a/b",       "a/c/d",   "a/c/d0",  "a/c-e", "a0",
                                "ab/c",  "b/1",     "b/10",      "b/2",     "b/2-x/y", "c",     "vol/chunks/0/0/1_0_4",
                                "vol/chunks/0/1/2_0_4", "vol/chunks/1/0/3_0_4", "z z/!", "z z/~"};
  for (const auto& k : keys) ASSERT_TRUE(store_->Put(k, k).ok()) << k;

  auto all = store_->List("", "", 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Keys(*all), std::vector<std::string>(keys.begin(), keys.end()));
  for (const auto& info : *all) EXPECT_EQ(info.size, info.key.size());

  std::vector<std::string> prefixes = {"", "a", "a/", "a/c", "a/c/", "b/", "b/2", "vol/", "vol/chunks/0/", "x", "z z/"};
  std::vector<std::string> starts = {"", "a", "a/", "a/b", "a/c", "a/c/d", "a0", "b/1", "b/2", "vol/chunks/0/", "zzz"};
  for (const auto& prefix : prefixes) {
    for (const auto& start : starts) {
      std::vector<std::string> want;
      for (const auto& k : keys) {
        if (k.starts_with(prefix) && k > start) want.push_back(k);
      }
      auto got = store_->List(prefix, start, 0);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(Keys(*got), want) << "prefix '" << prefix << "' start_after '" << start << "'";
      for (size_t limit : {1u, 2u, 3u}) {
        auto limited = store_->List(prefix, start, limit);
        ASSERT_TRUE(limited.ok());
        std::vector<std::string> head(want.begin(), want.begin() + std::min(limit, want.size()));
        EXPECT_EQ(Keys(*limited), head) << prefix << " " << start << " " << limit;
      }
    }
  }

  // Paging with limit 2 visits every key once, in order.
  std::vector<std::string> paged;
  std::string after;
  while (true) {
    auto page = store_->List("", after, 2);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const auto& i : *page) paged.push_back(i.key);
    after = page->back().key;
  }
  EXPECT_EQ(paged, std::vector<std::string>(keys.begin(), keys.end()));
}

TEST_F(FileStoreTest, ListOfMissingRootIsEmpty) {
  FileStore missing(tmp_.path() + "/does-not-exist");
  auto l = missing.List("", "", 0);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->empty());
}

TEST_F(FileStoreTest, ListSkipsTemporaryFilesAndUploads) {
  ASSERT_TRUE(store_->Put("d/real", "x").ok());
  // A writer that crashed mid-Put leaves a temporary file like this one behind.
  std::ofstream(root_ + "/d/.tmp.real.0123456789abcdef") << "partial";
  std::ofstream(root_ + "/.tmp.top.0123456789abcdef") << "partial";
  auto id = store_->CreateMultipart("big");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("big", *id, 1, "part").ok());

  auto l = store_->List("", "", 0);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Keys(*l), std::vector<std::string>{"d/real"});
}

TEST_F(FileStoreTest, ConcurrentPutsOfDistinctKeys) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 60;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Threads share parent directories, so they race to create them.
        std::string key = "vol/chunks/" + std::to_string(i % 7) + "/" + std::to_string(i % 3) + "/t" +
                          std::to_string(t) + "_" + std::to_string(i);
        if (!store_->Put(key, key + RandomData(1000, t * 1000 + i)).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto l = store_->List("vol/", "", 0);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_TRUE(std::is_sorted(l->begin(), l->end(), [](auto& a, auto& b) { return a.key < b.key; }));
  for (const auto& info : *l) {
    auto got = store_->Get(info.key);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(got->starts_with(info.key));
    EXPECT_EQ(got->size(), info.key.size() + 1000);
  }
  EXPECT_TRUE(TempFiles(root_).empty());
}

// Readers racing with a writer that replaces the object must always see one complete
// version, never a mix or a prefix.
TEST_F(FileStoreTest, ReadersNeverSeePartialObjects) {
  constexpr size_t kSize = 1 << 20;
  const std::string a(kSize, 'a'), b(kSize, 'b');
  ASSERT_TRUE(store_->Put("hot/obj", a).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        auto got = store_->Get("hot/obj");
        if (!got.ok() || (*got != a && *got != b)) ++bad;
        ++reads;
      }
    });
  }
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(store_->Put("hot/obj", i % 2 ? a : b).ok());
  while (reads < 50) std::this_thread::yield();
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(TempFiles(root_).empty());
}

TEST_F(FileStoreTest, RecreatesDirectoriesRemovedBehindItsBack) {
  ASSERT_TRUE(store_->Put("x/y/1", "1").ok());
  fs::remove_all(root_ + "/x");
  ASSERT_TRUE(store_->Put("x/y/2", "2").ok());
  EXPECT_EQ(*store_->Get("x/y/2"), "2");
}

TEST_F(FileStoreTest, FsyncOption) {
  FileStore synced(root_, FileStoreOptions{.fsync = true});
  ASSERT_TRUE(synced.Put("s/1", "durable").ok());
  EXPECT_EQ(*store_->Get("s/1"), "durable");
  auto id = synced.CreateMultipart("s/2");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(synced.UploadPart("s/2", *id, 1, "ab").ok());
  ASSERT_TRUE(synced.CompleteMultipart("s/2", *id, 1).ok());
  EXPECT_EQ(*synced.Get("s/2"), "ab");
}

TEST_F(FileStoreTest, Multipart) {
  auto id = store_->CreateMultipart("big/object");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::string p1 = RandomData(3 << 20, 1), p2 = RandomData(3 << 20, 2), p3 = RandomData(12345, 3);
  // Out of order, and part 2 re-uploaded (a retry replaces it).
  ASSERT_TRUE(store_->UploadPart("big/object", *id, 3, p3).ok());
  ASSERT_TRUE(store_->UploadPart("big/object", *id, 2, "stale").ok());
  ASSERT_TRUE(store_->UploadPart("big/object", *id, 1, p1).ok());
  ASSERT_TRUE(store_->UploadPart("big/object", *id, 2, p2).ok());
  EXPECT_EQ(store_->Head("big/object").status().code(), ENOENT);  // not visible before completion
  ASSERT_TRUE(store_->CompleteMultipart("big/object", *id, 3).ok());
  auto got = store_->Get("big/object");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, p1 + p2 + p3);
  EXPECT_FALSE(fs::exists(root_ + "/.multipart/" + *id));
  EXPECT_TRUE(TempFiles(root_).empty());

  // Completed uploads are gone.
  EXPECT_EQ(store_->UploadPart("big/object", *id, 1, "x").code(), ENOENT);
  EXPECT_EQ(store_->CompleteMultipart("big/object", *id, 1).code(), ENOENT);
}

TEST_F(FileStoreTest, MultipartErrors) {
  auto id = store_->CreateMultipart("m");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("m", *id, 1, "one").ok());
  Status missing = store_->CompleteMultipart("m", *id, 2);
  EXPECT_EQ(missing.code(), EINVAL);
  EXPECT_NE(missing.message().find("part 2"), std::string::npos) << missing.message();
  EXPECT_EQ(store_->Head("m").status().code(), ENOENT);
  EXPECT_TRUE(TempFiles(root_).empty());

  EXPECT_EQ(store_->UploadPart("m", *id, 0, "x").code(), EINVAL);
  EXPECT_EQ(store_->CompleteMultipart("m", *id, 0).code(), EINVAL);
  EXPECT_EQ(store_->UploadPart("m", "../../etc", 1, "x").code(), EINVAL);
  EXPECT_EQ(store_->UploadPart("m", "0123abcd", 1, "x").code(), ENOENT);

  ASSERT_TRUE(store_->AbortMultipart("m", *id).ok());
  EXPECT_FALSE(fs::exists(root_ + "/.multipart/" + *id));
  EXPECT_TRUE(store_->AbortMultipart("m", *id).ok());  // aborting twice is fine
  EXPECT_EQ(store_->UploadPart("m", *id, 1, "x").code(), ENOENT);
}

TEST(FileStoreInit, CreatesNestedRootAndDescribes) {
  TempDir tmp;
  std::string root = tmp.path() + "/x/y/z";
  FileStore store(root + "//");
  EXPECT_EQ(store.Describe(), "file://" + root + "/");
  ASSERT_TRUE(store.Init().ok());
  EXPECT_TRUE(fs::is_directory(root));
  EXPECT_TRUE(fs::is_empty(root));  // the probe file is gone
  ASSERT_TRUE(store.Init().ok());   // idempotent
}

TEST(FileStoreInit, SyncNeedsTheBucketDirectory) {
  TempDir tmp;
  std::string root = tmp.path() + "/bucket";
  FileStore store(root);
  ASSERT_TRUE(store.Init().ok());
  ASSERT_TRUE(store.Put("k", "v").ok());
  EXPECT_TRUE(store.Sync().ok());
  fs::remove_all(root);
  Status st = store.Sync();
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_NE(st.message().find(root), std::string::npos) << st.message();
}

TEST(FileStoreInit, BucketPathThroughARegularFile) {
  TempDir tmp;
  std::string file = tmp.path() + "/plain-file";
  std::ofstream(file) << "not a directory";

  FileStore below(file + "/bucket");
  Status st = below.Init();
  EXPECT_EQ(st.code(), ENOTDIR) << st.ToString();
  EXPECT_NE(st.message().find(file + "/bucket"), std::string::npos) << st.message();

  FileStore itself(file);
  st = itself.Init();
  EXPECT_EQ(st.code(), ENOTDIR) << st.ToString();
  EXPECT_NE(st.message().find("is not a directory"), std::string::npos) << st.message();
}

TEST(FileStoreInit, UnwritableBucketDirectory) {
  TempDir tmp;
  std::string mnt = tmp.path() + "/mnt";
  ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
  std::string bucket = mnt + "/bucket";
  std::unique_ptr<Tmpfs> tmpfs;
  if (geteuid() == 0) {
    // Root ignores permission bits, so make the directory truly unwritable: a read-only
    // mount.
    tmpfs = std::make_unique<Tmpfs>(mnt, "size=1m");
    if (!tmpfs->mounted()) GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
    ASSERT_EQ(mkdir(bucket.c_str(), 0755), 0);
    ASSERT_TRUE(tmpfs->RemountReadOnly()) << std::strerror(errno);
  } else {
    ASSERT_EQ(mkdir(bucket.c_str(), 0755), 0);
    ASSERT_EQ(chmod(bucket.c_str(), 0555), 0);
  }
  FileStore store(bucket);
  Status st = store.Init();
  EXPECT_EQ(st.code(), EACCES) << st.ToString();
  EXPECT_EQ(st.message().rfind("bucket directory " + bucket + " is not writable: ", 0), 0u) << st.message();

  Status put = store.Put("a/b", "x");
  EXPECT_EQ(put.code(), EACCES) << put.ToString();
  EXPECT_NE(put.message().find("a/b"), std::string::npos);

  // A bucket that would have to be created inside the unwritable directory.
  FileStore nested(bucket + "/sub");
  st = nested.Init();
  EXPECT_EQ(st.code(), EACCES) << st.ToString();
  EXPECT_NE(st.message().find(bucket + "/sub"), std::string::npos) << st.message();
  if (geteuid() != 0) chmod(bucket.c_str(), 0755);  // let TempDir clean up
}

TEST(FileStoreInit, DiskFull) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir tmp;
  std::string mnt = tmp.path() + "/mnt";
  ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
  Tmpfs tmpfs(mnt, "size=1m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);

  FileStore store(mnt + "/bucket");
  ASSERT_TRUE(store.Init().ok());
  std::string keep = RandomData(100000, 7);
  ASSERT_TRUE(store.Put("keep/me", keep).ok());

  Status big = store.Put("too/big", RandomData(2 << 20, 8));
  EXPECT_EQ(big.code(), ENOSPC) << big.ToString();
  EXPECT_NE(big.message().find("too/big"), std::string::npos) << big.message();
  EXPECT_NE(big.message().find("no space left"), std::string::npos) << big.message();

  // Fill the remaining space with smaller objects until the disk is full.
  Status st;
  int stored = 0;
  for (int i = 0; i < 100 && st.ok(); ++i) {
    st = store.Put("fill/" + std::to_string(i), RandomData(200000, i));
    if (st.ok()) ++stored;
  }
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_GT(stored, 0);

  // Everything stored before stays readable and no partial object or temp file is left.
  auto got = store.Get("keep/me");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, keep);
  EXPECT_EQ(store.Head("too/big").status().code(), ENOENT);
  EXPECT_TRUE(TempFiles(mnt).empty());
  auto l = store.List("fill/", "", 0);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), static_cast<size_t>(stored));
  for (const auto& info : *l) EXPECT_EQ(info.size, 200000u);
}

}  // namespace
}  // namespace tierfs

namespace tierfs {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Another local user must not read a volume's objects from the bucket: objects are 0600 in
// 0700 directories whatever the umask, a new bucket directory is 0700 (its missing parents
// as mkdir -p makes them), and Init takes group and other access away from the volume's
// directory that an earlier version made 0755.
TEST(FileStorePrivacy, ObjectsAndDirectoriesArePrivateToTheOwner) {
  TempDir tmp;
  mode_t old_umask = umask(022);
  std::string root = tmp.path() + "/parent/bucket";
  FileStoreOptions opts;
  opts.private_dir = "vol";
  FileStore store(root, opts);
  ASSERT_TRUE(store.Init().ok());
  EXPECT_EQ(ModeOf(tmp.path() + "/parent"), 0755u);
  EXPECT_EQ(ModeOf(root), 0700u);
  EXPECT_EQ(ModeOf(root + "/vol"), 0700u);
  ASSERT_TRUE(store.Put("vol/chunks/0a/1_0_3", "abc").ok());
  EXPECT_EQ(ModeOf(root + "/vol/chunks"), 0700u);
  EXPECT_EQ(ModeOf(root + "/vol/chunks/0a"), 0700u);
  EXPECT_EQ(ModeOf(root + "/vol/chunks/0a/1_0_3"), 0600u);
  auto id = store.CreateMultipart("vol/meta/dump");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(ModeOf(root + "/.multipart"), 0700u);
  ASSERT_TRUE(store.UploadPart("vol/meta/dump", *id, 1, "part").ok());
  EXPECT_EQ(ModeOf(root + "/.multipart/" + *id + "/1"), 0600u);
  ASSERT_TRUE(store.CompleteMultipart("vol/meta/dump", *id, 1).ok());
  EXPECT_EQ(ModeOf(root + "/vol/meta/dump"), 0600u);

  // A bucket an earlier version left open: the volume's directory is closed at Init.
  ASSERT_EQ(chmod((root + "/vol").c_str(), 0755), 0);
  ASSERT_EQ(chmod((root + "/.multipart").c_str(), 0755), 0);
  ASSERT_EQ(chmod(root.c_str(), 0755), 0);
  FileStore again(root, opts);
  ASSERT_TRUE(again.Init().ok());
  EXPECT_EQ(ModeOf(root + "/vol"), 0700u);
  EXPECT_EQ(ModeOf(root + "/.multipart"), 0700u);
  EXPECT_EQ(ModeOf(root), 0755u) << "the bucket directory itself is the user's to set";
  umask(old_umask);
}

}  // namespace
}  // namespace tierfs
