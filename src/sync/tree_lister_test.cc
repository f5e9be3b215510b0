// The tree lister's order (a directory's key sorts with its '/') and start/descend.
#include "sync/tree_lister.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace tierfs::sync {
namespace {

// A tree in memory: directory key -> children (name, is_dir).
using Tree = std::map<std::string, std::vector<std::pair<std::string, bool>>>;

class VecStream : public DirStream {
 public:
  explicit VecStream(std::vector<std::pair<std::string, bool>> v) : v_(std::move(v)) {
    std::sort(v_.begin(), v_.end());
  }
  Result<bool> Next(Entry* e) override {
    if (i_ == v_.size()) return false;
    e->key = v_[i_].first;
    e->kind = v_[i_].second ? Kind::kDir : Kind::kFile;
    ++i_;
    return true;
  }

 private:
  std::vector<std::pair<std::string, bool>> v_;
  size_t i_ = 0;
};

// Only the children of a directory named (all when names is null).
std::vector<std::pair<std::string, bool>> Only(const std::vector<std::pair<std::string, bool>>& all,
                                               const NameList& names) {
  if (!names) return all;
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& c : all) {
    if (std::binary_search(names->begin(), names->end(), c.first)) out.push_back(c);
  }
  return out;
}

std::vector<std::string> All(const Tree& t, const std::string& start, Descend descend = nullptr, int threads = 1,
                             std::atomic<int>* peak = nullptr, Children children = nullptr) {
  std::atomic<int> open_now{0};
  auto s = ListTree(
      [&](const std::string& dir, const NameList& names) -> Result<std::unique_ptr<DirStream>> {
        auto it = t.find(dir);
        if (it == t.end()) return Status::Err(ENOENT, "no directory " + dir);
        if (peak) {  // a slow server: opening takes a while, so parallel opens overlap
          int now = ++open_now;
          for (int p = peak->load(); now > p && !peak->compare_exchange_weak(p, now);) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          --open_now;
        }
        return std::unique_ptr<DirStream>(new VecStream(Only(it->second, names)));
      },
      start, descend, threads, children);
  std::vector<std::string> out;
  Entry e;
  for (;;) {
    auto r = s->Next(&e);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !*r) break;
    out.push_back(e.key);
  }
  return out;
}

TEST(TreeLister, DirectoriesSharingAPrefix) {
  // Directories "a" and "a.txt": "a.txt/" sorts before "a/" ('.' < '/'), the reverse of
  // their names' order (a bug the hypothesis rounds found).
  Tree t{{"", {{"a", true}, {"a.txt", true}, {"a0", false}}}, {"a/", {{"x", false}}}, {"a.txt/", {{"y", false}}}};
  std::vector<std::string> want = {"a.txt/", "a.txt/y", "a/", "a/x", "a0"};
  EXPECT_EQ(All(t, ""), want);
}

Tree Sample() {
  return Tree{{"", {{"a", true}, {"a.txt", false}, {"a0", false}, {"b", true}, {"a-b", false}}},
              {"a/", {{"x", false}, {"y", true}}},
              {"a/y/", {{"z", false}}},
              {"b/", {}}};
}

TEST(TreeLister, KeysInByteOrder) {
  auto keys = All(Sample(), "");
  std::vector<std::string> want = {"a-b", "a.txt", "a/", "a/x", "a/y/", "a/y/z", "a0", "b/"};
  EXPECT_EQ(keys, want);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST(TreeLister, StartsInsideATree) {
  std::vector<std::string> want = {"a/y/z", "a0", "b/"};
  EXPECT_EQ(All(Sample(), "a/y/z"), want);
  std::vector<std::string> after = {"a0", "b/"};  // "just after a/y/z"
  EXPECT_EQ(All(Sample(), std::string("a/y/z") + '\0'), after);
  std::vector<std::string> from_a = {"a/", "a/x", "a/y/", "a/y/z", "a0", "b/"};
  EXPECT_EQ(All(Sample(), "a/"), from_a);
}

TEST(TreeLister, DescendPrunes) {
  auto keys = All(Sample(), "", [](const Entry& e) { return e.key != "a/"; });
  std::vector<std::string> want = {"a-b", "a.txt", "a/", "a0", "b/"};
  EXPECT_EQ(keys, want);
}

// A random tree of odd names (prefixes of each other, '.', '-', '0' around '/').
Tree RandomTree(unsigned seed) {
  std::mt19937 rng(seed);
  const char* names[] = {"a", "a.b", "a-b", "a0", "b", "ab", "a b", "z"};
  Tree t;
  std::vector<std::string> dirs = {""};
  for (int i = 0; i < 60; ++i) {
    std::string parent = dirs[rng() % dirs.size()];
    std::string name = std::string(names[rng() % 8]) + std::to_string(rng() % 3);
    bool taken = false;
    for (auto& c : t[parent]) taken |= c.first == name;
    if (taken) continue;
    bool dir = rng() % 3 == 0;
    t[parent].emplace_back(name, dir);
    if (dir) {
      dirs.push_back(parent + name + "/");
      t[parent + name + "/"];
    }
  }
  return t;
}

TEST(TreeLister, ListingThreadsGiveTheSameStream) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    Tree t = RandomTree(seed);
    auto prune = [](const Entry& e) { return e.key.find("a0/") == std::string::npos; };
    for (const std::string& start : {std::string(), std::string("a"), std::string("b1/")}) {
      std::atomic<int> peak{0};
      EXPECT_EQ(All(t, start, prune, 8, &peak), All(t, start, prune)) << "seed " << seed << " start " << start;
    }
  }
  // The opens overlap: directories are read ahead in parallel.
  Tree wide;
  for (int i = 0; i < 64; ++i) {
    wide[""].emplace_back("d" + std::to_string(100 + i), true);
    wide["d" + std::to_string(100 + i) + "/"] = {{"f", false}};
  }
  std::atomic<int> peak{0};
  EXPECT_EQ(All(wide, "", nullptr, 8, &peak).size(), 128u);
  EXPECT_GT(peak.load(), 1);
  std::atomic<int> serial{0};
  All(wide, "", nullptr, 1, &serial);
  EXPECT_EQ(serial.load(), 1);
}

// An incremental round lists only some children of each directory: the stream is the full
// one with the others left out (and nothing below a directory left out).
TEST(TreeLister, OnlyTheChildrenNamed) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    Tree t = RandomTree(seed);
    std::mt19937 rng(seed);
    std::map<std::string, NameList> pick;  // directory -> names kept (null: all)
    for (const auto& [dir, children] : t) {
      if (rng() % 4 == 0) continue;
      auto names = std::make_shared<std::vector<std::string>>();
      for (const auto& c : children) {
        if (rng() % 2) names->push_back(c.first);
      }
      std::sort(names->begin(), names->end());
      pick[dir] = names;
    }
    Children children = [&](const std::string& dir) -> Result<NameList> {
      auto it = pick.find(dir);
      return it == pick.end() ? NameList() : it->second;
    };
    // The expected stream: the full one, without keys whose some ancestor's name was left out.
    std::vector<std::string> want;
    for (const std::string& key : All(t, "")) {
      bool kept = true;
      for (size_t i = 0; kept;) {
        size_t slash = key.find('/', i);
        std::string dir = key.substr(0, i), name = key.substr(i, slash == std::string::npos ? slash : slash - i);
        auto it = pick.find(dir);
        kept = it == pick.end() || std::binary_search(it->second->begin(), it->second->end(), name);
        if (slash == std::string::npos || slash + 1 == key.size()) break;
        i = slash + 1;
      }
      if (kept) want.push_back(key);
    }
    EXPECT_EQ(All(t, "", nullptr, 1, nullptr, children), want) << "seed " << seed;
    std::atomic<int> peak{0};
    EXPECT_EQ(All(t, "", nullptr, 8, &peak, children), want) << "seed " << seed;
  }
}

// A directory whose entries are read one at a time, counting the reads.
class CountingStream : public DirStream {
 public:
  CountingStream(int n, std::atomic<int>* read) : n_(n), read_(read) {}
  Result<bool> Next(Entry* e) override {
    if (i_ == n_) return false;
    char name[16];
    snprintf(name, sizeof(name), "d%07d", i_++);
    e->key = name;
    e->kind = Kind::kDir;
    ++*read_;
    return true;
  }

 private:
  int n_, i_ = 0;
  std::atomic<int>* read_;
};

// A directory of 100,000 subdirectories (and no file) is walked as it is read: a
// subdirectory is held back only while names that sort before its key may follow, so the
// memory does not grow with the directory (it held all of them back before the first key).
TEST(TreeLister, ManySubdirectoriesAreNotAllHeldBack) {
  std::atomic<int> read{0};
  auto s = ListTree(
      [&](const std::string& dir, const NameList&) -> Result<std::unique_ptr<DirStream>> {
        return std::unique_ptr<DirStream>(new CountingStream(dir.empty() ? 100000 : 0, &read));
      },
      "", nullptr, 1);
  Entry e;
  auto r = s->Next(&e);
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(e.key, "d0000000/");
  EXPECT_LT(read.load(), 10);
  int n = 1;
  std::string last = e.key;
  while (*(r = s->Next(&e))) {
    EXPECT_LT(last, e.key);
    last = e.key;
    ++n;
  }
  EXPECT_EQ(n, 100000);
}

class TreeListerThreads : public ::testing::TestWithParam<int> {};

TEST_P(TreeListerThreads, AnErrorIsAnError) {
  Tree t = Sample();
  t.erase("a/y/");
  auto s = ListTree(
      [&](const std::string& dir, const NameList&) -> Result<std::unique_ptr<DirStream>> {
        auto it = t.find(dir);
        if (it == t.end()) return Status::Err(EIO, "cannot read " + dir);
        return std::unique_ptr<DirStream>(new VecStream(it->second));
      },
      "", nullptr, GetParam());
  Entry e;
  Status failed;
  for (;;) {
    auto r = s->Next(&e);
    if (!r.ok()) {
      failed = r.status();
      break;
    }
    if (!*r) break;
  }
  EXPECT_EQ(failed.code(), EIO);  // never a silently shorter listing
}

INSTANTIATE_TEST_SUITE_P(OneAndEight, TreeListerThreads, ::testing::Values(1, 8));

}  // namespace
}  // namespace tierfs::sync
