// SortedNames: byte order whatever the input order, across spilled runs, with odd bytes.
#include "sync/sorted_names.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tierfs::sync {
namespace {

std::vector<std::string> RandomNames(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  const std::string alphabet = std::string("ab\n %/\xc3\xa9\xff", 9) + "Zz09";
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    size_t len = rng() % 12;  // "" included: a run must carry empty names too
    for (size_t k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
    v.push_back(s);
  }
  return v;
}

std::vector<std::string> Drain(SortedNames& s) {
  std::vector<std::string> out;
  std::string name;
  for (;;) {
    auto more = s.Next(&name);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    out.push_back(name);
  }
  return out;
}

TEST(SortedNames, SortsAcrossSpilledRuns) {
  for (size_t run : {1u, 3u, 64u, 1000u, 5000u}) {
    auto names = RandomNames(3000, static_cast<unsigned>(run));
    SortedNames s(run);
    for (const auto& n : names) ASSERT_TRUE(s.Add(n).ok());
    ASSERT_TRUE(s.Finish().ok());
    EXPECT_EQ(s.runs(), run >= 3000 ? 0u : (3000 + run - 1) / run) << "run " << run;
    auto want = names;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(Drain(s), want) << "run " << run;
  }
}

TEST(SortedNames, LongNamesCrossReadBuffers) {
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back(std::string(SortedNames::kReadBuffer / 3 + i * 97, 'a' + i % 26));
  std::shuffle(names.begin(), names.end(), std::mt19937(7));
  SortedNames s(4);
  for (const auto& n : names) ASSERT_TRUE(s.Add(n).ok());
  auto want = names;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Drain(s), want);  // Next finishes by itself
}

TEST(SortedNames, EmptyAndUnwritableTempDir) {
  SortedNames empty(2);
  EXPECT_TRUE(Drain(empty).empty());

  const char* old = getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", "/nonexistent-tierfs-dir", 1);
  SortedNames s(2);
  ASSERT_TRUE(s.Add("b").ok());
  Status st = s.Add("a");  // the first spill: the temporary file cannot be made
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("/nonexistent-tierfs-dir"), std::string::npos) << st.ToString();
  if (old) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace tierfs::sync
