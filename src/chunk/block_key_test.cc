#include "chunk/block_key.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <set>

#include "common/hash.h"

namespace tierfs {
namespace {

std::string Hex2(uint64_t id) {
  char buf[3];
  std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned>(Hash64(std::to_string(id)) % 256));
  return buf;
}

TEST(BlockKey, Format) {
  EXPECT_EQ(BlockKey("vol", 12345, 3, 4194304), "vol/chunks/" + Hex2(12345) + "/12345_3_4194304");
  EXPECT_EQ(BlockKey("v", 0, 0, 1), "v/chunks/" + Hex2(0) + "/0_0_1");
  EXPECT_EQ(BlockKey("v", UINT64_MAX, UINT32_MAX, UINT32_MAX),
            "v/chunks/" + Hex2(UINT64_MAX) + "/18446744073709551615_4294967295_4294967295");
}

TEST(BlockKey, FanOutSpreadsConsecutiveIds) {
  std::set<std::string> prefixes;
  for (uint64_t id = 1; id <= 5000; ++id) {
    std::string key = BlockKey("vol", id, 0, 4096);
    prefixes.insert(key.substr(0, key.rfind('/')));
  }
  EXPECT_EQ(prefixes.size(), 256u);
}

TEST(BlockKey, ParseRoundTrips) {
  std::mt19937_64 rng(7);
  for (const std::string volume : {"vol", "my-volume", "a/b", "x/chunks/y"}) {
    for (int i = 0; i < 200; ++i) {
      uint64_t id = i < 10 ? i : rng();
      uint32_t index = static_cast<uint32_t>(rng() % 1024);
      uint32_t len = static_cast<uint32_t>(rng() % (16 << 20)) + 1;
      std::string key = BlockKey(volume, id, index, len);
      std::string v;
      uint64_t pid = 0;
      uint32_t pindex = 0, plen = 0;
      ASSERT_TRUE(ParseBlockKey(key, &v, &pid, &pindex, &plen)) << key;
      EXPECT_EQ(v, volume);
      EXPECT_EQ(pid, id);
      EXPECT_EQ(pindex, index);
      EXPECT_EQ(plen, len);
    }
  }
}

TEST(BlockKey, ParseRejectsForeignKeys) {
  std::string v;
  uint64_t id;
  uint32_t index, len;
  std::string hh = Hex2(42);
  std::string other = hh == "00" ? "01" : "00";
  const std::string bad[] = {
      "",
      "vol",
      "vol/chunks/",
      "/chunks/" + hh + "/42_0_10",             // empty volume
      "vol/chunks/" + hh + "/42_0",             // missing len
      "vol/chunks/" + hh + "/42_0_10_1",        // extra field
      "vol/chunks/" + hh + "/042_0_10",         // leading zero
      "vol/chunks/" + hh + "/42_00_10",
      "vol/chunks/" + hh + "/42_0_+10",
      "vol/chunks/" + hh + "/42_0_-10",
      "vol/chunks/" + hh + "/42_0_0",           // empty block
      "vol/chunks/" + hh + "/42_0_10x",
      "vol/chunks/" + hh + "/42_4294967296_10",  // index overflows uint32
      "vol/chunks/" + hh + "/18446744073709551616_0_10",
      "vol/chunks/" + other + "/42_0_10",        // wrong fan-out
      "vol/chunks/" + hh + "x/42_0_10",
      "vol/chunks/" + hh + "/42_0_10/",
      "vol/data/" + hh + "/42_0_10",
  };
  for (const std::string& key : bad) EXPECT_FALSE(ParseBlockKey(key, &v, &id, &index, &len)) << key;
  EXPECT_TRUE(ParseBlockKey("vol/chunks/" + hh + "/42_0_10", &v, &id, &index, &len));
}

TEST(BlockSpans, CountAndLength) {
  EXPECT_EQ(BlockCount(0, 4096), 0u);
  EXPECT_EQ(BlockCount(1, 4096), 1u);
  EXPECT_EQ(BlockCount(4096, 4096), 1u);
  EXPECT_EQ(BlockCount(4097, 4096), 2u);
  EXPECT_EQ(BlockCount(64u << 20, 4u << 20), 16u);
  EXPECT_EQ(BlockCount(UINT32_MAX, 1u << 20), 4096u);
  EXPECT_EQ(BlockLength(10000, 4096, 0), 4096u);
  EXPECT_EQ(BlockLength(10000, 4096, 1), 4096u);
  EXPECT_EQ(BlockLength(10000, 4096, 2), 10000u - 8192u);
  EXPECT_EQ(BlockLength(10000, 4096, 3), 0u);
  EXPECT_EQ(BlockLength(8192, 4096, 1), 4096u);
  EXPECT_EQ(BlockLength(0, 4096, 0), 0u);
}

TEST(BlockSpans, HandCases) {
  EXPECT_TRUE(BlockSpans(10000, 4096, 0, 0).empty());
  EXPECT_EQ(BlockSpans(10000, 4096, 0, 10000),
            (std::vector<BlockSpan>{{0, 0, 4096}, {1, 0, 4096}, {2, 0, 1808}}));
  EXPECT_EQ(BlockSpans(10000, 4096, 4000, 200), (std::vector<BlockSpan>{{0, 4000, 96}, {1, 0, 104}}));
  EXPECT_EQ(BlockSpans(10000, 4096, 4096, 4096), (std::vector<BlockSpan>{{1, 0, 4096}}));
  EXPECT_EQ(BlockSpans(10000, 4096, 9000, 5000), (std::vector<BlockSpan>{{2, 808, 1000}}));  // clipped
  EXPECT_TRUE(BlockSpans(10000, 4096, 10000, 5).empty());
  EXPECT_TRUE(BlockSpans(10000, 4096, 20000, 5).empty());
  EXPECT_EQ(BlockSpans(UINT32_MAX, 1u << 31, UINT32_MAX - 1, UINT32_MAX),
            (std::vector<BlockSpan>{{1, (1u << 31) - 2, 1}}));
}

TEST(BlockSpans, RandomAgainstBytewiseModel) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    uint32_t block_size = 1 + rng() % 300;
    uint32_t size = rng() % 2000;
    uint32_t off = rng() % 2100;
    uint32_t len = rng() % 800;
    std::vector<BlockSpan> spans = BlockSpans(size, block_size, off, len);
    // Expand the spans and compare with the byte-by-byte answer.
    std::vector<std::pair<uint32_t, uint32_t>> got, want;
    for (const BlockSpan& s : spans) {
      ASSERT_GT(s.len, 0u);
      ASSERT_LE(s.offset_in_block + s.len, BlockLength(size, block_size, s.index));
      for (uint32_t i = 0; i < s.len; ++i) got.emplace_back(s.index, s.offset_in_block + i);
    }
    for (uint64_t b = off; b < std::min<uint64_t>(uint64_t{off} + len, size); ++b) {
      want.emplace_back(static_cast<uint32_t>(b / block_size), static_cast<uint32_t>(b % block_size));
    }
    ASSERT_EQ(got, want) << "size=" << size << " bs=" << block_size << " off=" << off << " len=" << len;
  }
}

}  // namespace
}  // namespace tierfs

namespace tierfs {
namespace {

TEST(PackKey, RoundTripsAndRejectsOtherKeys) {
  std::string key = PackKey("vol", 77, 1234);
  EXPECT_NE(key.find("vol/packs/"), std::string::npos);
  std::string volume;
  uint64_t id = 0;
  uint32_t len = 0;
  ASSERT_TRUE(ParsePackKey(key, &volume, &id, &len));
  EXPECT_EQ(volume, "vol");
  EXPECT_EQ(id, 77u);
  EXPECT_EQ(len, 1234u);
  EXPECT_FALSE(ParsePackKey(BlockKey("vol", 77, 0, 1234), &volume, &id, &len));
  EXPECT_FALSE(ParsePackKey("vol/packs/00/77_1234", &volume, &id, &len));  // wrong fan-out
  std::string packed = PackedBlockKey("vol", 77, 1234, 1000);
  std::string pack_key;
  uint32_t off = 0;
  ASSERT_TRUE(ParsePackedBlockKey(packed, &pack_key, &off));
  EXPECT_EQ(pack_key, key);
  EXPECT_EQ(off, 1000u);
  EXPECT_FALSE(ParsePackedBlockKey(PackedBlockKey("vol", 77, 1234, 1234), &pack_key, &off));  // past the end
  EXPECT_FALSE(ParsePackedBlockKey(key, &pack_key, &off));
  EXPECT_FALSE(ParsePackedBlockKey(BlockKey("vol", 1, 0, 5), &pack_key, &off));
  uint64_t sid = 0;
  uint32_t index = 0;
  EXPECT_FALSE(ParseBlockKey(packed, &volume, &sid, &index, &len));
}

}  // namespace
}  // namespace tierfs
