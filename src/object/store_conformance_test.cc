// The ObjectStore contract (object_store.h), checked the same way on every backend: a
// local directory, memory, S3 (radosgw: TIERFS_TEST_S3_*), RADOS (TIERFS_TEST_CEPH_CONF,
// TIERFS_TEST_RADOS_POOL) and Azure Blob Storage (Azurite: TIERFS_TEST_AZURE_*), the last
// also with every object sent as blocks (put_limit=64K) and with a SAS token instead of the
// account key. Backends whose servers are not configured are skipped; ctest configures
// them all (tests/servers.py).
//
// The stores are raw (no checksum wrapper): these are the backends' own answers.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "object/azure_test_sas.h"
#include "object/object_store.h"

namespace tierfs {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string RandomName() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

std::string RandomData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

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

std::vector<std::string> Keys(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> out;
  for (const auto& i : infos) out.push_back(i.key);
  return out;
}

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string backend = GetParam();
    StorageSpec spec;
    if (backend == "file") {
      char tmpl[] = "/tmp/tierfs-conformance-XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      spec.storage = "file";
      spec.bucket = dir_;
      spec.sync_puts = false;  // durability is not what these cases check
    } else if (backend == "mem") {
      spec.storage = "mem";
      spec.bucket = "conformance-" + RandomName();
    } else if (backend == "s3") {
      if (Env("TIERFS_TEST_S3_ENDPOINT").empty()) GTEST_SKIP() << "TIERFS_TEST_S3_ENDPOINT is not set (no radosgw)";
      spec.storage = "s3";
      spec.bucket = Env("TIERFS_TEST_S3_ENDPOINT") + "/tierfs-conformance";
      spec.access_key = Env("TIERFS_TEST_S3_ACCESS_KEY");
      spec.secret_key = Env("TIERFS_TEST_S3_SECRET_KEY");
    } else if (backend == "rados") {
      if (Env("TIERFS_TEST_CEPH_CONF").empty() || Env("TIERFS_TEST_RADOS_POOL").empty()) {
        GTEST_SKIP() << "TIERFS_TEST_CEPH_CONF and TIERFS_TEST_RADOS_POOL are not set (no Ceph cluster)";
      }
      spec.storage = "rados";
      spec.bucket = Env("TIERFS_TEST_RADOS_POOL");
      spec.ceph_conf = Env("TIERFS_TEST_CEPH_CONF");
    } else if (backend.starts_with("azure")) {
      if (Env("TIERFS_TEST_AZURE_ENDPOINT").empty()) {
        GTEST_SKIP() << "TIERFS_TEST_AZURE_ENDPOINT is not set (no Azurite)";
      }
      const std::string account = Env("TIERFS_TEST_AZURE_ACCOUNT");
      spec.storage = "azure";
      spec.bucket = Env("TIERFS_TEST_AZURE_ENDPOINT") + "/" + account + "/tierfs-conformance";
      spec.secret_key = Env("TIERFS_TEST_AZURE_KEY");
      if (backend == "azure_blocks") spec.bucket += "?put_limit=64K";
      if (backend == "azure_sas") spec.secret_key = "sas:" + AccountSasForTests(account, spec.secret_key, "rwdlac");
    } else {
      FAIL() << "unknown backend " << backend;
    }
    auto store = CreateRawObjectStore(spec);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    Status st = store_->Init();
    ASSERT_TRUE(st.ok()) << st.ToString();
    p_ = "conformance-" + RandomName() + "/";
  }

  void TearDown() override {
    if (store_ != nullptr) {
      // Everything under this test's prefix goes, even after a failure.
      auto all = store_->List(p_, "", 0);
      EXPECT_TRUE(all.ok()) << all.status().ToString();
      if (all.ok()) {
        ParallelFor(static_cast<int>(all->size()), 8,
                    [&](int i) { EXPECT_TRUE(store_->Delete((*all)[i].key).ok()); });
      }
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  ObjectStore& s() { return *store_; }

  std::unique_ptr<ObjectStore> store_;
  std::string dir_;
  std::string p_;  // this test's key prefix
};

TEST_P(StoreConformance, PutGetAndRangedGet) {
  const std::string data = RandomData(100000, 1);
  ASSERT_TRUE(s().Put(p_ + "obj", data).ok());
  auto whole = s().Get(p_ + "obj");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, data);
  struct Case {
    uint64_t off;
    int64_t len;
    std::string want;
  };
  const Case cases[] = {
      {0, 1, data.substr(0, 1)},
      {5, 10, data.substr(5, 10)},
      {65535, 2, data.substr(65535, 2)},
      {1000, -1, data.substr(1000)},
      {data.size() - 3, 10, data.substr(data.size() - 3)},  // runs past the end
      {data.size(), 10, ""},                                // starts at the end
      {data.size() + 100, 5, ""},                           // starts past the end
      {7, 0, ""},
  };
  for (const Case& c : cases) {
    auto got = s().Get(p_ + "obj", c.off, c.len);
    ASSERT_TRUE(got.ok()) << "off " << c.off << " len " << c.len << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << "off " << c.off << " len " << c.len;
  }
  auto info = s().Head(p_ + "obj");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(info->key, p_ + "obj");
}

TEST_P(StoreConformance, PutPartsIsTheConcatenation) {
  const std::string a = RandomData(70000, 2), b = RandomData(3, 3), c = RandomData(90000, 4);
  ASSERT_TRUE(s().PutParts(p_ + "parts", {a, "", b, c}).ok());
  auto got = s().Get(p_ + "parts");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, a + b + c);
}

TEST_P(StoreConformance, EmptyObject) {
  ASSERT_TRUE(s().Put(p_ + "empty", "").ok());
  auto got = s().Get(p_ + "empty");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "");
  auto ranged = s().Get(p_ + "empty", 0, 10);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  EXPECT_EQ(*ranged, "");
  auto info = s().Head(p_ + "empty");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 0u);
  auto listed = s().List(p_, "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, 0u);
}

TEST_P(StoreConformance, MissingObjectsAreENOENTAndDeletingThemSucceeds) {
  auto head = s().Head(p_ + "missing");
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), ENOENT) << head.status().ToString();
  auto get = s().Get(p_ + "missing");
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().code(), ENOENT) << get.status().ToString();
  auto ranged = s().Get(p_ + "missing", 10, 5);
  ASSERT_FALSE(ranged.ok());
  EXPECT_EQ(ranged.status().code(), ENOENT) << ranged.status().ToString();
  Status del = s().Delete(p_ + "missing");
  EXPECT_TRUE(del.ok()) << del.ToString();

  ASSERT_TRUE(s().Put(p_ + "x", "x").ok());
  ASSERT_TRUE(s().Delete(p_ + "x").ok());
  EXPECT_EQ(s().Head(p_ + "x").status().code(), ENOENT);
  EXPECT_TRUE(s().Delete(p_ + "x").ok());
}

TEST_P(StoreConformance, OverwriteReplacesDataAndSize) {
  ASSERT_TRUE(s().Put(p_ + "o", RandomData(300000, 5)).ok());
  const std::string v2 = RandomData(1234, 6);
  ASSERT_TRUE(s().Put(p_ + "o", v2).ok());
  auto got = s().Get(p_ + "o");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, v2);
  auto info = s().Head(p_ + "o");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, v2.size());
  auto listed = s().List(p_, "", 0);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, v2.size());
}

TEST_P(StoreConformance, ListOrderPrefixStartAfterAndLimit) {
  // '-' < '/' < '0' in byte order; no key is also a "directory" of another (file stores).
  const std::vector<std::string> names = {"a0", "a/b", "a-", "ab", "b/c/d", "b/c/e", "ba", "z"};
  for (const auto& n : names) ASSERT_TRUE(s().Put(p_ + n, n).ok());
  std::vector<std::string> want;
  for (const auto& n : names) want.push_back(p_ + n);
  std::sort(want.begin(), want.end());

  auto all = s().List(p_, "", 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Keys(*all), want);
  for (const auto& o : *all) EXPECT_EQ(o.size, o.key.size() - p_.size());

  auto b = s().List(p_ + "b", "", 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Keys(*b), (std::vector<std::string>{p_ + "b/c/d", p_ + "b/c/e", p_ + "ba"}));

  auto after = s().List(p_, p_ + "ab", 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Keys(*after), (std::vector<std::string>{p_ + "b/c/d", p_ + "b/c/e", p_ + "ba", p_ + "z"}));
  // start_after need not be a key.
  auto between = s().List(p_, p_ + "b/c/d0", 2);
  ASSERT_TRUE(between.ok());
  EXPECT_EQ(Keys(*between), (std::vector<std::string>{p_ + "b/c/e", p_ + "ba"}));

  auto limited = s().List(p_, "", 3);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(Keys(*limited), std::vector<std::string>(want.begin(), want.begin() + 3));
  auto none = s().List(p_ + "nothing-here/", "", 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto past = s().List(p_, p_ + "z", 10);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->empty());
}

TEST_P(StoreConformance, ListPagesThroughMoreThanOneServerPage) {
  // More keys than one List Blobs (5000 max, asked for 1000 here) or ListObjectsV2 (1000)
  // answer holds.
  if (GetParam() == "azure_blocks" || GetParam() == "azure_sas") {
    GTEST_SKIP() << "lists as the azure backend does (2500 objects on Azurite take half a minute)";
  }
  constexpr int kKeys = 2500;
  std::vector<std::string> want(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "many/%05d", i);
    want[i] = p_ + buf;
  }
  std::atomic<int> failed{0};
  ParallelFor(kKeys, 8, [&](int i) { failed += !s().Put(want[i], "v").ok(); });
  ASSERT_EQ(failed.load(), 0);

  std::vector<std::string> seen;
  std::vector<size_t> pages;
  std::string after;
  for (int calls = 0; calls < 10; ++calls) {
    auto page = s().List(p_ + "many/", after, 1000);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    if (page->empty()) break;
    pages.push_back(page->size());
    for (auto& o : *page) seen.push_back(o.key);
    after = page->back().key;
  }
  EXPECT_EQ(pages, (std::vector<size_t>{1000, 1000, 500}));
  EXPECT_EQ(seen, want);

  auto all = s().List(p_ + "many/", "", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Keys(*all), want);
  // Starting anywhere, also at a key no listing returned last.
  auto mid = s().List(p_ + "many/", want[1234], 3);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(Keys(*mid), std::vector<std::string>(want.begin() + 1235, want.begin() + 1238));
  // A page that ends where the listing does, asked again for what follows it: nothing,
  // and again after a new key appears: that key.
  auto tail = s().List(p_ + "many/", want[2000], 0);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->size(), 499u);
  auto more = s().List(p_ + "many/", want.back(), 10);
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(more->empty());
  ASSERT_TRUE(s().Put(p_ + "many/99999", "late").ok());
  more = s().List(p_ + "many/", want.back(), 10);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(Keys(*more), std::vector<std::string>{p_ + "many/99999"});
}

TEST_P(StoreConformance, KeysWithSpacesUtf8PercentAndPlus) {
  const std::vector<std::string> names = {"sp ace/x y", "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac", "100%",
                                          "a+b=c",      "q?&=#;,$@!",                            "tilde~'()*"};
  for (const auto& n : names) {
    Status st = s().Put(p_ + n, "data of " + n);
    ASSERT_TRUE(st.ok()) << n << ": " << st.ToString();
  }
  for (const auto& n : names) {
    auto got = s().Get(p_ + n);
    ASSERT_TRUE(got.ok()) << n << ": " << got.status().ToString();
    EXPECT_EQ(*got, "data of " + n);
    auto info = s().Head(p_ + n);
    ASSERT_TRUE(info.ok()) << n << ": " << info.status().ToString();
    EXPECT_EQ(info->size, ("data of " + n).size());
  }
  std::vector<std::string> want;
  for (const auto& n : names) want.push_back(p_ + n);
  std::sort(want.begin(), want.end());
  auto listed = s().List(p_, "", 0);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(Keys(*listed), want);
  // Paging one key at a time resumes after keys that need encoding.
  std::vector<std::string> paged;
  std::string after;
  for (size_t i = 0; i <= names.size(); ++i) {
    auto page = s().List(p_, after, 1);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    paged.push_back(page->front().key);
    after = page->front().key;
  }
  EXPECT_EQ(paged, want);
  for (const auto& n : names) EXPECT_TRUE(s().Delete(p_ + n).ok()) << n;
  auto left = s().List(p_, "", 0);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_P(StoreConformance, MultipartWithSeveralParts) {
  // S3 wants every part but the last to be at least 5 MiB.
  const std::string p1 = RandomData(5 << 20, 7), p2 = RandomData(5 << 20, 8), p3 = RandomData(1000, 9);
  auto id = s().CreateMultipart(p_ + "mp");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Parts may arrive in any order.
  ASSERT_TRUE(s().UploadPart(p_ + "mp", *id, 3, p3).ok());
  ASSERT_TRUE(s().UploadPart(p_ + "mp", *id, 1, p1).ok());
  ASSERT_TRUE(s().UploadPart(p_ + "mp", *id, 2, p2).ok());
  Status st = s().CompleteMultipart(p_ + "mp", *id, 3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = s().Get(p_ + "mp");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == p1 + p2 + p3) << "multipart object reads back wrong (" << got->size() << " bytes)";
  auto across = s().Get(p_ + "mp", (5 << 20) - 10, 20);
  ASSERT_TRUE(across.ok());
  EXPECT_EQ(*across, (p1 + p2).substr((5 << 20) - 10, 20));
  auto info = s().Head(p_ + "mp");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, p1.size() + p2.size() + p3.size());

  // An aborted upload leaves no object.
  auto id2 = s().CreateMultipart(p_ + "aborted");
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(s().UploadPart(p_ + "aborted", *id2, 1, "part").ok());
  ASSERT_TRUE(s().AbortMultipart(p_ + "aborted", *id2).ok());
  EXPECT_EQ(s().Head(p_ + "aborted").status().code(), ENOENT);
}

TEST_P(StoreConformance, ObjectMetaRoundTripsWithRangedGets) {
  const std::string data = RandomData(200000, 10);
  const std::string meta = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v+/==";
  if (!s().HasObjectMeta()) {
    EXPECT_EQ(s().PutWithMeta(p_ + "m", data, meta).code(), EOPNOTSUPP);
    GTEST_SKIP() << s().Describe() << " keeps no object metadata";
  }
  ASSERT_TRUE(s().PutWithMeta(p_ + "m", data, meta).ok());
  std::string got_meta;
  auto whole = s().GetWithMeta(p_ + "m", 0, -1, &got_meta);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, data);
  EXPECT_EQ(got_meta, meta);
  got_meta.clear();
  auto ranged = s().GetWithMeta(p_ + "m", 70000, 100, &got_meta);
  ASSERT_TRUE(ranged.ok());
  EXPECT_EQ(*ranged, data.substr(70000, 100));
  EXPECT_EQ(got_meta, meta);
  auto info = s().Head(p_ + "m");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, data.size());
  // A plain put over it carries no metadata.
  ASSERT_TRUE(s().Put(p_ + "m", "plain").ok());
  got_meta = "stale";
  auto plain = s().GetWithMeta(p_ + "m", 0, -1, &got_meta);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "plain");
  EXPECT_EQ(got_meta, "");
  // Missing objects are ENOENT here too.
  EXPECT_EQ(s().GetWithMeta(p_ + "none", 0, 10, &got_meta).status().code(), ENOENT);
}

TEST_P(StoreConformance, ConcurrentPutsAndGets) {
  constexpr int kObjects = 64;
  std::atomic<int> failed{0};
  ParallelFor(kObjects, 8, [&](int i) {
    std::string key = p_ + "c/" + std::to_string(i);
    std::string data = RandomData(1000 + i * 997, 100 + i);
    if (!s().Put(key, data).ok()) ++failed;
    auto got = s().Get(key);
    if (!got.ok() || *got != data) ++failed;
  });
  EXPECT_EQ(failed.load(), 0);
  auto listed = s().List(p_ + "c/", "", 0);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(kObjects));
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, StoreConformance,
                         ::testing::Values("file", "mem", "s3", "rados", "azure", "azure_blocks", "azure_sas"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tierfs
