// ObjectMeta's JSON: the fast reader and nlohmann's decide alike on what ToJson writes and on
// whatever else may sit in the xattr (written by hand through a mount, or damaged).
#include "gateway/object_meta.h"

#include <gtest/gtest.h>

#include <random>

namespace tierfs::gateway {
namespace {

bool Same(const std::optional<ObjectMeta>& a, const std::optional<ObjectMeta>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->etag == b->etag && a->seq == b->seq && a->content_type == b->content_type && a->user == b->user &&
         a->checksums == b->checksums && a->headers == b->headers && a->parts == b->parts && a->dir == b->dir;
}

std::string RandomText(std::mt19937_64& rng) {
  static const char* kPieces[] = {"a", "b", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x01", "\x1f", " ",
                                  "\xc3\xa9", "\xe2\x82\xac", "{", "}", "[", "]", ",", ":", "0", "9", "-"};
  std::string s;
  size_t n = rng() % 12;
  for (size_t i = 0; i < n; ++i) s += kPieces[rng() % std::size(kPieces)];
  return s;
}

ObjectMeta RandomMeta(std::mt19937_64& rng) {
  ObjectMeta m;
  if (rng() % 4) {
    m.etag = "e" + RandomText(rng);  // ToJson keeps seq only with an ETag
    m.seq = rng() % 3 == 0 ? rng() : rng() % 1000;
  }
  if (rng() % 2) m.content_type = RandomText(rng);
  for (int i = rng() % 3; i > 0; --i) m.user[RandomText(rng)] = RandomText(rng);
  for (int i = rng() % 3; i > 0; --i) m.checksums[RandomText(rng)] = RandomText(rng);
  for (int i = rng() % 2; i > 0; --i) m.headers[RandomText(rng)] = RandomText(rng);
  if (rng() % 3 == 0) m.parts = static_cast<uint32_t>(rng());
  if (rng() % 4 == 0) m.dir = rng() % 2 ? "implicit" : "explicit";
  return m;
}

TEST(ObjectMetaTest, WhatToJsonWritesReadsBack) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    ObjectMeta m = RandomMeta(rng);
    auto back = ObjectMeta::FromJson(m.ToJson());
    ASSERT_TRUE(Same(back, m)) << m.ToJson();
  }
}

TEST(ObjectMetaTest, TheFastReaderDecidesAsNlohmannOnAnyInput) {
  std::mt19937_64 rng(11);
  const std::string kNoise[] = {" ", "\\u0041", "\\ud83d\\ude00", "-1", "1.5", "1e3", "01", "null", "true", "[]",
                                "{}", "\"", "\\", ",", ":", "}", "{", "18446744073709551615",
                                "18446744073709551616", "\"x\":1", "\"seq\":2", "\"etag\":\"e\""};
  for (int i = 0; i < 20000; ++i) {
    std::string s = RandomMeta(rng).ToJson();
    // Mutate: insert, replace or cut at random places.
    for (int k = rng() % 3; k >= 0; --k) {
      size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      const std::string& noise = kNoise[rng() % std::size(kNoise)];
      switch (rng() % 3) {
        case 0: s.insert(at, noise); break;
        case 1: s.replace(at, std::min<size_t>(noise.size(), s.size() - at), noise); break;
        default: s.resize(at); break;
      }
    }
    auto dom = ObjectMeta::FromJsonDom(s);
    ASSERT_TRUE(Same(ObjectMeta::FromJson(s), dom)) << s;
    auto listed = ObjectMeta::FromJson(s, true);
    ASSERT_EQ(listed.has_value(), dom.has_value()) << s;
    if (dom) {
      EXPECT_EQ(listed->etag, dom->etag) << s;
      EXPECT_EQ(listed->seq, dom->seq) << s;
      EXPECT_EQ(listed->parts, dom->parts) << s;
      EXPECT_EQ(listed->dir, dom->dir) << s;
    }
  }
}

TEST(ObjectMetaTest, HandWrittenCases) {
  // White space and \u escapes take the slow path and still read.
  auto m = ObjectMeta::FromJson(R"( { "etag" : "\u0061b", "seq" : 3 } )");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->etag, "ab");
  EXPECT_EQ(m->seq, 3u);
  EXPECT_FALSE(ObjectMeta::FromJson(R"({"etag":5})"));
  EXPECT_FALSE(ObjectMeta::FromJson("{\"etag\":\"a\"} x"));
  EXPECT_FALSE(ObjectMeta::FromJson(""));
  auto dup = ObjectMeta::FromJson(R"({"etag":"a","etag":"b"})");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->etag, "b");
  auto unknown = ObjectMeta::FromJson(R"({"future":[1,2],"etag":"a"})");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->etag, "a");
}

}  // namespace
}  // namespace tierfs::gateway
