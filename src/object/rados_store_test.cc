// Tests of the RADOS backend against a real Ceph cluster (TIERFS_TEST_CEPH_CONF and
// TIERFS_TEST_RADOS_POOL, set by ctest through tests/servers.py; skipped without them).
#include "object/rados_store.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "common/clock.h"

namespace tierfs {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string RandomData(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return s;
}

std::string RandomSuffix() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Runs f(i) for i in [0, n) on `threads` threads.
template <typename F>
void ParallelFor(int n, int threads, F f) {
  std::atomic<int> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) f(i);
    });
  }
  for (auto& t : ts) t.join();
}

class RadosStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = Env("TIERFS_TEST_CEPH_CONF");
    pool_ = Env("TIERFS_TEST_RADOS_POOL");
    if (conf_.empty() || pool_.empty()) {
      GTEST_SKIP() << "TIERFS_TEST_CEPH_CONF and TIERFS_TEST_RADOS_POOL are not set (no Ceph cluster)";
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = std::string("rados-test-") + std::to_string(getpid()) + "-" + RandomSuffix() + "/" + info->name() + "/";
    auto store = NewRadosStore(Spec(pool_));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    Status st = store_->Init();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  void TearDown() override {
    if (store_ == nullptr) return;
    // Everything under this test's prefix goes, even after a failure.
    auto all = store_->List(prefix_, "", 0);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    std::vector<std::string> keys;
    for (const auto& o : *all) keys.push_back(o.key);
    ParallelFor(static_cast<int>(keys.size()), 8, [&](int i) { EXPECT_TRUE(store_->Delete(keys[i]).ok()); });
    auto left = store_->List(prefix_, "", 0);
    ASSERT_TRUE(left.ok());
    EXPECT_TRUE(left->empty());
  }

  StorageSpec Spec(const std::string& pool, const std::string& conf = "") const {
    StorageSpec spec;
    spec.storage = "rados";
    spec.bucket = pool;
    spec.ceph_conf = conf.empty() ? conf_ : conf;
    return spec;
  }

  std::string Key(const std::string& name) const { return prefix_ + name; }

  // Writes a copy of the test cluster's ceph.conf with the monitor ports replaced by ones
  // nothing listens on, plus extra lines in [global].
  std::string DeadMonitorConf(const std::string& extra) {
    std::ifstream in(conf_);
    std::string text, line;
    bool found = false;
    while (std::getline(in, line)) {
      // Point the monitors at port 9 (discard), which a test machine does not serve.
      if (line.rfind("mon host", 0) == 0 || line.rfind("mon_host", 0) == 0) {
        line = "mon host = 127.0.0.1:9";
        found = true;
      }
      text += line + "\n";
      if (line == "[global]") text += extra + "\n";
    }
    EXPECT_TRUE(found) << conf_ << " has no mon host line";
    std::string path = fs::temp_directory_path().string() + "/tierfs-dead-mon-" + RandomSuffix() + ".conf";
    std::ofstream(path) << text;
    temp_files_.push_back(path);
    return path;
  }

  ~RadosStoreTest() override {
    for (const auto& f : temp_files_) fs::remove(f);
  }

  std::string conf_, pool_, prefix_;
  std::unique_ptr<ObjectStore> store_;
  std::vector<std::string> temp_files_;
};

TEST(RadosStoreSpec, DescribeAndValidation) {
  StorageSpec spec;
  spec.storage = "rados";
  spec.bucket = "mypool";
  auto s = NewRadosStore(spec);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Describe(), "rados://mypool");
  spec.ceph_conf = "/etc/ceph/other.conf";
  s = NewRadosStore(spec);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Describe(), "rados://mypool?conf=/etc/ceph/other.conf");

  spec.bucket = "";
  s = NewRadosStore(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), EINVAL);
  EXPECT_NE(s.status().message().find("pool name"), std::string::npos);

  // Through the generic factory too.
  spec.bucket = "mypool";
  auto raw = CreateRawObjectStore(spec);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)->Describe(), "rados://mypool?conf=/etc/ceph/other.conf");
}

TEST(RadosStoreSpec, MissingConfigurationFileIsAClearError) {
  StorageSpec spec;
  spec.storage = "rados";
  spec.bucket = "mypool";
  spec.ceph_conf = "/nonexistent/tierfs/ceph.conf";
  auto s = NewRadosStore(spec);
  ASSERT_TRUE(s.ok());
  Status st = (*s)->Init();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("/nonexistent/tierfs/ceph.conf"), std::string::npos) << st.message();
  // An operation must not report an unusable cluster as a missing object.
  auto got = (*s)->Get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EIO);
}

TEST_F(RadosStoreTest, PutGetHeadDelete) {
  const std::string key = Key("a/b/object");
  const std::string data = RandomData(100000, 1);
  int64_t before = NowNanos();
  ASSERT_TRUE(store_->Put(key, data).ok());
  auto got = store_->Get(key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);

  auto info = store_->Head(key);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->key, key);
  EXPECT_EQ(info->size, data.size());
  // The OSD stamps the client's clock; allow for coarse clocks.
  EXPECT_GE(info->mtime_ns, before - 2000000000LL);
  EXPECT_LE(info->mtime_ns, NowNanos() + 2000000000LL);

  // Overwrite replaces the whole object, including with a shorter one.
  ASSERT_TRUE(store_->Put(key, "short").ok());
  EXPECT_EQ(*store_->Get(key), "short");
  EXPECT_EQ(store_->Head(key)->size, 5u);

  // Empty objects exist and read as empty.
  ASSERT_TRUE(store_->Put(Key("empty"), "").ok());
  auto empty = store_->Get(Key("empty"));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, "");
  EXPECT_EQ(store_->Head(Key("empty"))->size, 0u);

  ASSERT_TRUE(store_->Delete(key).ok());
  auto missing = store_->Get(key);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ENOENT);
  EXPECT_NE(missing.status().message().find(key), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find(pool_), std::string::npos) << missing.status().message();
  EXPECT_EQ(store_->Head(key).status().code(), ENOENT);
  EXPECT_EQ(store_->Get(key, 0, 0).status().code(), ENOENT);
  EXPECT_EQ(store_->Get(key, 10, 5).status().code(), ENOENT);
  // Deleting a missing object succeeds.
  EXPECT_TRUE(store_->Delete(key).ok());

  EXPECT_EQ(store_->Put("", "x").code(), EINVAL);
  EXPECT_EQ(store_->Get("").status().code(), EINVAL);
}

TEST_F(RadosStoreTest, PutPartsIsByteExact) {
  const std::string a = RandomData(70000, 2), b = "", c = RandomData(3, 3), d = RandomData(1 << 20, 4);
  ASSERT_TRUE(store_->PutParts(Key("parts"), {a, b, c, d}).ok());
  auto got = store_->Get(Key("parts"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, a + b + c + d);
  ASSERT_TRUE(store_->PutParts(Key("none"), {}).ok());
  EXPECT_EQ(store_->Head(Key("none"))->size, 0u);
}

TEST_F(RadosStoreTest, RangedGet) {
  const std::string key = Key("ranged");
  const std::string data = RandomData(1 << 20, 5);
  ASSERT_TRUE(store_->Put(key, data).ok());
  struct Case {
    uint64_t off;
    int64_t len;
  };
  const uint64_t n = data.size();
  for (Case c : std::vector<Case>{{0, -1},
                                  {0, 1},
                                  {1, 10},
                                  {4095, 4097},
                                  {n - 1, 1},
                                  {n - 1, 100},     // past the end: what exists
                                  {n - 10, -1},     // to the end
                                  {12345, -1},
                                  {n, 10},          // at the end: nothing
                                  {n + 100, -1},    // beyond: nothing
                                  {500, 0},         // zero length
                                  {0, static_cast<int64_t>(n) * 4}}) {
    auto got = store_->Get(key, c.off, c.len);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::string want = c.off >= n ? "" : data.substr(c.off, c.len < 0 ? std::string::npos : static_cast<size_t>(c.len));
    EXPECT_EQ(got->size(), want.size()) << "off " << c.off << " len " << c.len;
    EXPECT_TRUE(*got == want) << "off " << c.off << " len " << c.len;
  }
}

TEST_F(RadosStoreTest, ListOrderAndPagingAcrossManyObjects) {
  constexpr int kObjects = 2500;
  std::vector<std::string> keys;
  for (int i = 0; i < kObjects; ++i) {
    // Mixed depths and lengths so that hash order and key order differ a lot.
    char name[64];
    std::snprintf(name, sizeof(name), "d%02d/%s%d", i % 37, (i % 3 == 0) ? "x/" : "", i * 7919 % 100003);
    keys.push_back(Key(name));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  ParallelFor(static_cast<int>(keys.size()), 8, [&](int i) {
    ASSERT_TRUE(store_->Put(keys[i], std::string(static_cast<size_t>(i % 50), 'v')).ok());
  });

  // All at once, in order, with sizes and mtimes.
  auto all = store_->List(prefix_, "", 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), keys.size());
  int64_t now = NowNanos();
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*all)[i].key, keys[i]);
    EXPECT_EQ((*all)[i].size, i % 50);
    EXPECT_GT((*all)[i].mtime_ns, now - 600LL * 1000000000LL);
  }

  // Paging the way gc does, with small and large limits.
  for (size_t limit : {size_t{1}, size_t{7}, size_t{1000}, size_t{5000}}) {
    std::vector<std::string> seen;
    std::string after;
    int pages = 0;
    for (;;) {
      auto page = store_->List(prefix_, after, limit);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->empty()) break;
      ASSERT_LE(page->size(), limit);
      for (const auto& o : *page) seen.push_back(o.key);
      after = page->back().key;
      ASSERT_LT(++pages, 5000);
      if (limit == 1 && pages >= 300) break;  // a sample is enough one by one
    }
    std::vector<std::string> want(keys.begin(), keys.begin() + static_cast<long>(seen.size()));
    EXPECT_EQ(seen, want) << "limit " << limit;
    if (limit != 1) {
      EXPECT_EQ(seen.size(), keys.size());
    }
  }

  // Sub-prefixes, a start_after that is not a key, and one before the prefix.
  std::string sub = Key("d05/");
  std::vector<std::string> want_sub;
  for (const auto& k : keys) {
    if (k.rfind(sub, 0) == 0) want_sub.push_back(k);
  }
  auto got_sub = store_->List(sub, "", 0);
  ASSERT_TRUE(got_sub.ok());
  std::vector<std::string> got_keys;
  for (const auto& o : *got_sub) got_keys.push_back(o.key);
  EXPECT_EQ(got_keys, want_sub);
  auto from_middle = store_->List(prefix_, Key("d10/5"), 3);
  ASSERT_TRUE(from_middle.ok());
  auto it = std::upper_bound(keys.begin(), keys.end(), Key("d10/5"));
  ASSERT_EQ(from_middle->size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*from_middle)[i].key, *(it + static_cast<long>(i)));
  auto before_prefix = store_->List(prefix_, "a", 2);
  ASSERT_TRUE(before_prefix.ok());
  ASSERT_EQ(before_prefix->size(), 2u);
  EXPECT_EQ((*before_prefix)[0].key, keys[0]);
  auto nothing = store_->List(prefix_ + "no-such-prefix/", "", 10);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty());
}

TEST_F(RadosStoreTest, ListPassSkipsDeletedObjectsWithoutEndingEarly) {
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "k%03d", i);
    keys.push_back(Key(name));
  }
  ParallelFor(60, 8, [&](int i) { ASSERT_TRUE(store_->Put(keys[i], "x").ok()); });
  auto first = store_->List(prefix_, "", 10);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 10u);
  EXPECT_EQ(first->back().key, keys[9]);
  // Delete a run longer than a page right after the first page; the pass continues past it.
  for (int i = 10; i < 35; ++i) ASSERT_TRUE(store_->Delete(keys[i]).ok());
  auto second = store_->List(prefix_, first->back().key, 10);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 10u);
  EXPECT_EQ(second->front().key, keys[35]);
  // A new pass (empty start_after) sees objects created since the last one.
  ASSERT_TRUE(store_->Put(Key("k010-new"), "y").ok());
  auto fresh = store_->List(prefix_, "", 11);
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(fresh->size(), 11u);
  EXPECT_EQ(fresh->back().key, Key("k010-new"));
}

TEST_F(RadosStoreTest, MultipartRoundTrip) {
  const std::string key = Key("big/multipart");
  const std::string p1 = RandomData(3 << 20, 11), p2 = RandomData(2 << 20, 12), p3 = RandomData(12345, 13);
  auto id = store_->CreateMultipart(key);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Out of order, and part 2 re-uploaded (the second upload wins).
  ASSERT_TRUE(store_->UploadPart(key, *id, 3, p3).ok());
  ASSERT_TRUE(store_->UploadPart(key, *id, 2, "wrong").ok());
  ASSERT_TRUE(store_->UploadPart(key, *id, 1, p1).ok());
  ASSERT_TRUE(store_->UploadPart(key, *id, 2, p2).ok());
  // Parts are not objects.
  auto listed = store_->List(prefix_, "", 0);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  // An upload belongs to its key.
  EXPECT_NE(store_->UploadPart(Key("other"), *id, 1, "x").code(), 0);
  EXPECT_NE(store_->CompleteMultipart(Key("other"), *id, 3).code(), 0);

  Status st = store_->CompleteMultipart(key, *id, 3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = store_->Get(key);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), p1.size() + p2.size() + p3.size());
  EXPECT_TRUE(*got == p1 + p2 + p3);
  auto info = store_->Head(key);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->mtime_ns, NowNanos() - 60LL * 1000000000LL);
  listed = store_->List(prefix_, "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, key);

  // The upload is gone.
  EXPECT_EQ(store_->UploadPart(key, *id, 4, "x").code(), ENOENT);
  EXPECT_EQ(store_->CompleteMultipart(key, *id, 3).code(), ENOENT);
  EXPECT_TRUE(store_->AbortMultipart(key, *id).ok());

  // A single part, and a missing part.
  auto id2 = store_->CreateMultipart(Key("one"));
  ASSERT_TRUE(id2.ok());
  EXPECT_NE(*id2, *id);
  ASSERT_TRUE(store_->UploadPart(Key("one"), *id2, 1, "only").ok());
  EXPECT_EQ(store_->CompleteMultipart(Key("one"), *id2, 2).code(), EINVAL);
  ASSERT_TRUE(store_->CompleteMultipart(Key("one"), *id2, 1).ok());
  EXPECT_EQ(*store_->Get(Key("one")), "only");

  // Abort removes the parts; the key never appears.
  auto id3 = store_->CreateMultipart(Key("aborted"));
  ASSERT_TRUE(id3.ok());
  ASSERT_TRUE(store_->UploadPart(Key("aborted"), *id3, 1, "a").ok());
  ASSERT_TRUE(store_->AbortMultipart(Key("aborted"), *id3).ok());
  EXPECT_EQ(store_->UploadPart(Key("aborted"), *id3, 2, "b").code(), ENOENT);
  EXPECT_EQ(store_->CompleteMultipart(Key("aborted"), *id3, 1).code(), ENOENT);
  EXPECT_EQ(store_->Head(Key("aborted")).status().code(), ENOENT);

  EXPECT_EQ(store_->UploadPart(key, "not-an-id", 1, "x").code(), EINVAL);
  EXPECT_EQ(store_->UploadPart(key, *id3, 0, "x").code(), EINVAL);
  EXPECT_EQ(store_->CompleteMultipart(key, *id3, 0).code(), EINVAL);
}

TEST_F(RadosStoreTest, ConcurrentPutGetFromEightThreads) {
  constexpr int kThreads = 8, kOpsPerThread = 40;
  // Shared keys are overwritten concurrently with whole versions; a reader must always see
  // one complete version (atomic replacement).
  const std::vector<std::string> versions = {RandomData(200000, 21), RandomData(150000, 22),
                                             RandomData(250000, 23)};
  std::atomic<int> failures{0};
  ASSERT_TRUE(store_->Put(Key("shared"), versions[0]).ok());
  ParallelFor(kThreads, kThreads, [&](int t) {
    for (int i = 0; i < kOpsPerThread; ++i) {
      std::string own = Key("t" + std::to_string(t) + "/" + std::to_string(i));
      std::string data = RandomData(static_cast<size_t>(1000 + i * 997), static_cast<uint64_t>(t * 1000 + i));
      if (!store_->Put(own, data).ok()) failures++;
      auto got = store_->Get(own);
      if (!got.ok() || *got != data) failures++;
      if (i % 4 == 0 && !store_->Delete(own).ok()) failures++;
      if (i % 3 == 0) {
        if (!store_->Put(Key("shared"), versions[static_cast<size_t>(t + i) % versions.size()]).ok()) failures++;
      } else {
        auto shared = store_->Get(Key("shared"));
        if (!shared.ok() || std::find(versions.begin(), versions.end(), *shared) == versions.end()) failures++;
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  auto listed = store_->List(prefix_, "", 0);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(1 + kThreads * (kOpsPerThread - kOpsPerThread / 4)));
}

TEST_F(RadosStoreTest, InitCreatesAMissingPool) {
  const std::string pool = "tierfs-test-" + RandomSuffix();
  auto store = NewRadosStore(Spec(pool));
  ASSERT_TRUE(store.ok());
  // Before Init, operations do not create the pool and do not report ENOENT for it.
  auto early = (*store)->Get("k");
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), EIO);
  EXPECT_NE(early.status().message().find("pool " + pool + " does not exist"), std::string::npos)
      << early.status().message();

  Status st = (*store)->Init();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*store)->Put("k", "v").ok());
  EXPECT_EQ(*(*store)->Get("k"), "v");
  EXPECT_TRUE((*store)->Init().ok());  // idempotent
  store->reset();

  st = DeleteRadosPool(Spec(pool));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(DeleteRadosPool(Spec(pool)).ok());  // already gone
  // A fresh store sees the pool gone.
  auto again = NewRadosStore(Spec(pool));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Head("k").status().code(), EIO);
}

TEST_F(RadosStoreTest, UnreachableMonitorFailsWithinTheTimeout) {
  // Configured timeout: ceph.conf values win over the store's defaults.
  std::string conf = DeadMonitorConf("client mount timeout = 2");
  auto store = NewRadosStore(Spec(pool_, conf));
  ASSERT_TRUE(store.ok());
  auto start = std::chrono::steady_clock::now();
  Status st = (*store)->Init();
  double took = Seconds(start);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("cannot connect to the Ceph cluster described by " + conf), std::string::npos)
      << st.message();
  EXPECT_GE(took, 1.5);
  EXPECT_LT(took, 15.0);
  // Later calls try again, and fail the same way (EIO, not "missing object").
  auto got = (*store)->Get("k");
  EXPECT_EQ(got.status().code(), EIO);
  // Callers waiting behind one attempt share its failure instead of retrying in turn
  // (8 attempts in a row would take 16 s).
  start = std::chrono::steady_clock::now();
  std::atomic<int> eio{0};
  ParallelFor(8, 8, [&](int i) {
    if ((*store)->Head("k" + std::to_string(i)).status().code() == EIO) eio++;
  });
  EXPECT_EQ(eio.load(), 8);
  EXPECT_LT(Seconds(start), 10.0);

  // The store's own default (10 s) bounds a configuration that says nothing.
  std::string plain = DeadMonitorConf("");
  auto store2 = NewRadosStore(Spec(pool_, plain));
  ASSERT_TRUE(store2.ok());
  start = std::chrono::steady_clock::now();
  st = (*store2)->Init();
  took = Seconds(start);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.message();
  EXPECT_LT(took, 40.0);
}

// Not a performance assertion: prints rates for the report (docs/benchmarks.md has the real
// numbers).
TEST_F(RadosStoreTest, Throughput4MiB) {
  constexpr int kObjects = 64;
  const std::string block = RandomData(4 << 20, 31);
  for (int threads : {1, 8}) {
    auto start = std::chrono::steady_clock::now();
    ParallelFor(kObjects, threads, [&](int i) {
      ASSERT_TRUE(store_->Put(Key("tp/" + std::to_string(i)), block).ok());
    });
    double put_s = Seconds(start);
    start = std::chrono::steady_clock::now();
    ParallelFor(kObjects, threads, [&](int i) {
      auto got = store_->Get(Key("tp/" + std::to_string(i)));
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got->size(), block.size());
    });
    double get_s = Seconds(start);
    double mib = kObjects * 4.0;
    std::printf("[rados] 4 MiB objects, %d thread(s): put %.0f MiB/s, get %.0f MiB/s\n", threads, mib / put_s,
                mib / get_s);
  }
}

}  // namespace
}  // namespace tierfs
