// The parallel listing of an object store (by level, then each prefix on its own) gives the
// same stream as one flat listing, from any start, and fails when any part of it fails.
#include "sync/store_lister.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "object/mem_store.h"

namespace tierfs::sync {
namespace {

std::vector<std::string> Keys(ObjectStore* store, const std::string& prefix, const std::string& start, int threads,
                              Status* error = nullptr) {
  auto s = ListStore(store, prefix, start, threads);
  std::vector<std::string> out;
  Entry e;
  for (;;) {
    auto r = s->Next(&e);
    if (!r.ok()) {
      if (error) *error = r.status();
      break;
    }
    if (!*r) break;
    out.push_back(e.key);
  }
  return out;
}

// Keys with markers ("a/"), names that prefix each other around '/' ("a.txt", "a0", "a-b"),
// empty components ("a//b"), spaces and UTF-8, at several depths.
std::set<std::string> RandomKeys(unsigned seed, int n) {
  std::mt19937 rng(seed);
  const char* parts[] = {"a", "a.txt", "a0", "a-b", "b", "ab", "a b", "\xc3\xa9t\xc3\xa9", "", "z"};
  std::set<std::string> keys;
  for (int i = 0; i < n; ++i) {
    std::string k = "top/";
    int depth = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < depth; ++d) {
      k += parts[rng() % 10];
      if (d + 1 < depth) k += "/";
    }
    if (rng() % 7 == 0) k += "/";  // a directory marker
    if (k != "top/") keys.insert(k);
  }
  keys.insert("top/");   // the prefix's own marker: never a key of the side
  keys.insert("other");  // outside the prefix
  return keys;
}

TEST(StoreLister, ParallelIsTheFlatStream) {
  for (unsigned seed = 0; seed < 10; ++seed) {
    MemStore store("lister" + std::to_string(seed));
    for (const std::string& k : RandomKeys(seed, 400)) ASSERT_TRUE(store.Put(k, "x").ok());
    auto flat = Keys(&store, "top/", "", 1);
    ASSERT_GT(flat.size(), 50u);
    EXPECT_TRUE(std::is_sorted(flat.begin(), flat.end()));
    EXPECT_EQ(Keys(&store, "top/", "", 4), flat) << "seed " << seed;
    // From starts inside the stream (a resumed run): keys, prefixes, "just after" a key.
    for (size_t i = 0; i < flat.size(); i += flat.size() / 7) {
      for (const std::string& start : {flat[i], flat[i] + '\0', flat[i].substr(0, flat[i].size() / 2)}) {
        EXPECT_EQ(Keys(&store, "top/", start, 4), Keys(&store, "top/", start, 1))
            << "seed " << seed << " start '" << start << "'";
      }
    }
  }
}

TEST(StoreLister, ManyPrefixesAndAWideLevel) {
  MemStore store("wide");
  std::vector<std::string> want;
  for (int d = 0; d < 300; ++d) {  // more prefixes than are read ahead, more keys than a page
    for (int f = 0; f < (d % 50 == 0 ? 1500 : 3); ++f) {
      std::string k = "d" + std::to_string(1000 + d) + "/f" + std::to_string(10000 + f);
      ASSERT_TRUE(store.Put(k, "").ok());
      want.push_back(k);
    }
  }
  for (int f = 0; f < 2500; ++f) {  // objects at the top level, across level pages
    std::string k = "t" + std::to_string(10000 + f);
    ASSERT_TRUE(store.Put(k, "").ok());
    want.push_back(k);
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Keys(&store, "", "", 1), want);
  EXPECT_EQ(Keys(&store, "", "", 8), want);
}

// A store whose listing of one prefix fails: the stream fails, it does not end early.
class FailingStore : public MemStore {
 public:
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override {
    if (prefix == "d1005/") return Status::Err(EIO, "injected listing failure");
    return MemStore::List(prefix, start_after, limit);
  }
};

TEST(StoreLister, AFailedPrefixFailsTheStream) {
  FailingStore store;
  for (int d = 0; d < 40; ++d) ASSERT_TRUE(store.Put("d" + std::to_string(1000 + d) + "/f", "").ok());
  Status error;
  auto keys = Keys(&store, "", "", 4, &error);
  EXPECT_EQ(error.code(), EIO);
  EXPECT_EQ(keys.size(), 5u);  // d1000/f .. d1004/f, then the error
}

// Stores without level listings (RADOS, files) are listed flat with threads too.
TEST(StoreLister, StoresWithoutLevelsListFlat) {
  class Flat : public MemStore {
   public:
    Result<LevelPage> ListLevel(const std::string&, const std::string&) override {
      return Status::Err(EOPNOTSUPP, "no levels");
    }
  } store;
  for (const std::string& k : RandomKeys(3, 100)) ASSERT_TRUE(store.Put(k, "").ok());
  EXPECT_EQ(Keys(&store, "top/", "", 4), Keys(&store, "top/", "", 1));
}

}  // namespace
}  // namespace tierfs::sync
