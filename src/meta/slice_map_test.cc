#include "meta/slice_map.h"

#include <gtest/gtest.h>

#include <random>

namespace tierfs {
namespace {

SliceRecord Rec(uint64_t seq, uint32_t pos, uint64_t id, uint32_t size, uint32_t off, uint32_t len) {
  return SliceRecord{seq, pos, id, size, off, len};
}

using Segs = std::vector<ChunkSegment>;

TEST(SliceMap, Empty) {
  EXPECT_TRUE(BuildSliceMap({}).empty());
  EXPECT_TRUE(BuildSliceMap({Rec(1, 10, 5, 100, 0, 0)}).empty());  // len 0 ignored
}

TEST(SliceMap, SingleRecord) {
  EXPECT_EQ(BuildSliceMap({Rec(1, 100, 7, 1000, 20, 50)}), (Segs{{100, 50, 7, 1000, 20}}));
}

TEST(SliceMap, OverwriteInTheMiddleSplits) {
  Segs got = BuildSliceMap({Rec(1, 0, 1, 1000, 0, 1000), Rec(2, 100, 2, 50, 0, 50)});
  EXPECT_EQ(got, (Segs{{0, 100, 1, 1000, 0}, {100, 50, 2, 50, 0}, {150, 850, 1, 1000, 150}}));
}

TEST(SliceMap, OrderIsBySeqNotInputOrder) {
  // The older full write comes last in the input but must be shadowed.
  Segs got = BuildSliceMap({Rec(9, 100, 2, 50, 0, 50), Rec(3, 0, 1, 1000, 0, 1000)});
  EXPECT_EQ(got, (Segs{{0, 100, 1, 1000, 0}, {100, 50, 2, 50, 0}, {150, 850, 1, 1000, 150}}));
  // Reversed seqs: the big write wins everywhere.
  got = BuildSliceMap({Rec(3, 100, 2, 50, 0, 50), Rec(9, 0, 1, 1000, 0, 1000)});
  EXPECT_EQ(got, (Segs{{0, 1000, 1, 1000, 0}}));
}

TEST(SliceMap, ExactAndSpanningShadows) {
  Segs got = BuildSliceMap({Rec(1, 0, 1, 100, 0, 100), Rec(2, 100, 2, 100, 0, 100), Rec(3, 200, 3, 100, 0, 100),
                            Rec(4, 50, 4, 200, 10, 200)});
  EXPECT_EQ(got, (Segs{{0, 50, 1, 100, 0}, {50, 200, 4, 200, 10}, {250, 50, 3, 100, 50}}));
  got = BuildSliceMap({Rec(1, 10, 1, 100, 0, 100), Rec(2, 10, 2, 100, 0, 100)});
  EXPECT_EQ(got, (Segs{{10, 100, 2, 100, 0}}));
}

TEST(SliceMap, GapsAreOmitted) {
  Segs got = BuildSliceMap({Rec(1, 1000, 1, 10, 0, 10), Rec(2, 0, 2, 10, 0, 10)});
  EXPECT_EQ(got, (Segs{{0, 10, 2, 10, 0}, {1000, 10, 1, 10, 0}}));
}

TEST(SliceMap, HolesShadowWithZeros) {
  // A truncate-style hole record over the tail of a write.
  Segs got = BuildSliceMap({Rec(1, 0, 1, 100, 0, 100), Rec(2, 60, 0, 0, 0, 1000)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (ChunkSegment{0, 60, 1, 100, 0}));
  EXPECT_EQ(got[1].pos, 60u);
  EXPECT_EQ(got[1].len, 1000u);
  EXPECT_EQ(got[1].id, 0u);
}

TEST(SliceMap, ClipsAtChunkEnd) {
  uint32_t pos = static_cast<uint32_t>(kChunkSize - 10);
  Segs got = BuildSliceMap({Rec(1, pos, 1, 100, 0, 100)});
  EXPECT_EQ(got, (Segs{{pos, 10, 1, 100, 0}}));
}

TEST(SliceMap, SliceClipsPieces) {
  Segs map = {{0, 100, 1, 1000, 0}, {100, 50, 2, 50, 0}, {300, 100, 3, 500, 200}};
  EXPECT_TRUE(Slice(map, 0, 0).empty());
  EXPECT_TRUE(Slice(map, 150, 150).empty());
  EXPECT_TRUE(Slice(map, 400, 10).empty());
  EXPECT_EQ(Slice(map, 90, 20), (Segs{{90, 10, 1, 1000, 90}, {100, 10, 2, 50, 0}}));
  EXPECT_EQ(Slice(map, 120, 200), (Segs{{120, 30, 2, 50, 20}, {300, 20, 3, 500, 200}}));
  EXPECT_EQ(Slice(map, 0, UINT32_MAX), map);
  EXPECT_EQ(Slice(map, 350, 5), (Segs{{350, 5, 3, 500, 250}}));
}

// The model: for every byte of a small chunk, which slice byte it shows (written = false for
// never-written bytes, id 0 for explicit zeros).
struct Tag {
  bool written = false;
  uint64_t id = 0;
  uint32_t off = 0;
  bool operator==(const Tag& o) const {
    return written == o.written && id == o.id && (id == 0 || off == o.off);
  }
};

constexpr uint32_t kModelSize = 4096;

std::vector<Tag> Expand(const Segs& segs) {
  std::vector<Tag> out(kModelSize);
  for (const ChunkSegment& s : segs) {
    for (uint32_t i = 0; i < s.len; ++i) {
      if (s.pos + i < kModelSize) out[s.pos + i] = Tag{true, s.id, s.off + i};
    }
  }
  return out;
}

void CheckWellFormed(const Segs& segs) {
  for (size_t i = 0; i < segs.size(); ++i) {
    ASSERT_GT(segs[i].len, 0u);
    if (segs[i].id != 0) {
      ASSERT_LE(uint64_t{segs[i].off} + segs[i].len, segs[i].size);
    }
    if (i > 0) {
      ASSERT_LE(uint64_t{segs[i - 1].pos} + segs[i - 1].len, segs[i].pos);
    }
  }
}

TEST(SliceMap, RandomizedAgainstByteModel) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    int n = 1 + static_cast<int>(rng() % (iter % 10 == 0 ? 100 : 12));
    std::vector<SliceRecord> records;
    for (int i = 0; i < n; ++i) {
      SliceRecord r;
      r.seq = rng() % 1000;  // duplicates allowed: ties keep input order
      uint32_t a = rng() % kModelSize, b = rng() % kModelSize;
      if (rng() % 3 == 0) b = a + rng() % 64;  // small writes are common
      r.pos = std::min(a, b);
      r.len = std::min<uint32_t>(std::max(a, b), kModelSize) - r.pos;
      r.id = rng() % 8 == 0 ? 0 : 1 + rng() % 1000000;
      r.size = r.len + static_cast<uint32_t>(rng() % 500);
      r.off = r.id == 0 ? 0 : static_cast<uint32_t>(rng() % (r.size - r.len + 1));
      if (r.id == 0) r.size = rng() % 2 ? 0 : kUnwrittenSize;
      records.push_back(r);
    }
    std::vector<Tag> model(kModelSize);
    std::vector<SliceRecord> sorted = records;
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& x, auto& y) { return x.seq < y.seq; });
    std::vector<bool> allocated(kModelSize);
    for (const SliceRecord& r : sorted) {
      for (uint32_t i = 0; i < r.len; ++i) {
        model[r.pos + i] = Tag{true, r.id, r.off + i};
        allocated[r.pos + i] = r.id != 0 || r.size == kUnwrittenSize;
      }
    }
    Segs segs = BuildSliceMap(records);
    ASSERT_NO_FATAL_FAILURE(CheckWellFormed(segs));
    ASSERT_TRUE(Expand(segs) == model) << "iteration " << iter;

    // Slice() of a random range equals the model restricted to that range.
    uint32_t pos = rng() % kModelSize, len = rng() % kModelSize;
    Segs piece = Slice(segs, pos, len);
    ASSERT_NO_FATAL_FAILURE(CheckWellFormed(piece));
    std::vector<Tag> want = model;
    for (uint32_t i = 0; i < kModelSize; ++i) {
      if (i < pos || uint64_t{i} >= uint64_t{pos} + len) want[i] = Tag{};
    }
    ASSERT_TRUE(Expand(piece) == want) << "iteration " << iter << " slice " << pos << "+" << len;

    // Allocated bytes, unallocated ranges, and SEEK_DATA / SEEK_HOLE from a random
    // position, against the model.
    auto is_data = [&](uint64_t i) { return model[i].written && model[i].id != 0; };
    uint64_t end = std::min<uint64_t>(kModelSize, uint64_t{pos} + len);
    uint64_t alloc = 0;
    std::vector<std::pair<uint32_t, uint32_t>> holes;
    for (uint64_t i = pos; i < end; ++i) {
      alloc += allocated[i];
      if (allocated[i]) continue;
      if (!holes.empty() && holes.back().second == i) holes.back().second++;
      else holes.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1));
    }
    ASSERT_EQ(AllocatedBytes(segs, pos, len), alloc) << "iteration " << iter;
    ASSERT_EQ(Unallocated(segs, pos, static_cast<uint32_t>(end)), holes) << "iteration " << iter;
    uint64_t next_data = pos, next_hole = pos;
    while (next_data < end && !is_data(next_data)) ++next_data;
    while (next_hole < end && is_data(next_hole)) ++next_hole;
    ASSERT_EQ(NextData(segs, pos, end, true), next_data) << "iteration " << iter;
    ASSERT_EQ(NextData(segs, pos, end, false), next_hole) << "iteration " << iter;

    // The same in blocks (64 bytes here; 4 KiB in files): a block with a data byte (before
    // `end`) is data; allocated blocks; blocks a punch of [pos, end) leaves unallocated.
    constexpr uint64_t kUnit = 64;
    auto block_data = [&](uint64_t b) {
      for (uint64_t i = b * kUnit; i < std::min<uint64_t>((b + 1) * kUnit, end); ++i) {
        if (is_data(i)) return true;
      }
      return false;
    };
    uint64_t want_data = end, want_hole = end;
    for (uint64_t b = pos / kUnit; b * kUnit < end; ++b) {
      if (want_data == end && block_data(b)) want_data = std::max<uint64_t>(pos, b * kUnit);
      if (want_hole == end && !block_data(b)) want_hole = std::max<uint64_t>(pos, b * kUnit);
    }
    ASSERT_EQ(NextDataBlock(segs, pos, end, true, kUnit), want_data) << "iteration " << iter;
    ASSERT_EQ(NextDataBlock(segs, pos, end, false, kUnit), want_hole) << "iteration " << iter;
    uint64_t blocks = 0, freed = 0;
    for (uint64_t b = pos / kUnit; b * kUnit < end; ++b) {
      bool inside = false, outside = false;
      for (uint64_t i = b * kUnit; i < (b + 1) * kUnit && i < kModelSize; ++i) {
        if (!allocated[i]) continue;
        (i >= pos && i < end ? inside : outside) = true;
      }
      blocks += inside;
      freed += inside && !outside;
    }
    ASSERT_EQ(AllocatedBlocks(segs, pos, end, kUnit), blocks) << "iteration " << iter;
    ASSERT_EQ(BlocksFreedByPunch(segs, pos, end, kUnit), freed) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace tierfs
