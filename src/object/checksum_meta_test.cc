// ChecksumStore with its tables in object metadata (format version 2 on S3), over the
// in-memory store, which keeps metadata as S3 does. The inline layout is checksum_store_test.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "common/base64.h"
#include "common/hash.h"
#include "object/checksum_store.h"
#include "object/mem_store.h"

namespace tierfs {
namespace {

constexpr uint64_t kSeg = kChecksumSegment;

std::string RandomData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string Be32(uint32_t v) {
  std::string be;
  for (int i = 3; i >= 0; --i) be.push_back(static_cast<char>(v >> (8 * i)));
  return be;
}

class ChecksumMetaTest : public ::testing::Test {
 protected:
  ChecksumMetaTest() {
    auto mem = std::make_unique<MemStore>("meta");
    mem_ = mem.get();
    store_ = std::make_unique<ChecksumStore>(std::move(mem), /*table_in_meta=*/true);
  }
  // Rewrites the stored object and its metadata (the decoded table) through f.
  void Tamper(const std::string& key, const std::function<void(std::string* data, std::string* table)>& f) {
    std::string meta;
    std::string data = *mem_->GetWithMeta(key, 0, -1, &meta);
    std::string table = *Base64Decode(meta);
    f(&data, &table);
    ASSERT_TRUE(mem_->PutWithMeta(key, data, Base64Encode(table)).ok());
  }
  uint64_t GetsFor(const std::string& key, uint64_t off, int64_t len, const std::string& want) {
    mem_->ResetCounters();
    auto got = store_->Get(key, off, len);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(*got, want) << key << " " << off << "+" << len;
    }
    return mem_->gets() + mem_->heads();
  }
  MemStore* mem_;
  std::unique_ptr<ChecksumStore> store_;
};

TEST_F(ChecksumMetaTest, TheObjectIsItsDataAndTheTableItsMetadata) {
  std::string data = RandomData(kSeg + 10, 1);
  ASSERT_TRUE(store_->Put("k", data).ok());
  std::string meta;
  EXPECT_EQ(*mem_->GetWithMeta("k", 0, -1, &meta), data);
  std::string table = *Base64Decode(meta);
  ASSERT_EQ(table.size(), 12u + 8);
  EXPECT_EQ(table.substr(0, 4), "TFB1");
  EXPECT_EQ(table.substr(4, 4), Be32(static_cast<uint32_t>(data.size())));
  EXPECT_EQ(table.substr(8, 4), Be32(kSeg));
  EXPECT_EQ(table.substr(12, 4), Be32(Checksum32(std::string_view(data).substr(0, kSeg))));
  EXPECT_EQ(table.substr(16, 4), Be32(Checksum32(std::string_view(data).substr(kSeg))));
}

TEST_F(ChecksumMetaTest, RoundTripAndSizes) {
  std::vector<uint64_t> sizes = {0, 1, 100};
  for (uint64_t k = 1; k <= 3; ++k) {
    sizes.push_back(k * kSeg - 1);
    sizes.push_back(k * kSeg);
    sizes.push_back(k * kSeg + 1);
  }
  sizes.push_back(16 << 20);  // the largest block: 256 segments of 64 KiB
  for (uint64_t size : sizes) {
    std::string key = "obj/" + std::to_string(size);
    std::string data = RandomData(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(store_->Put(key, data).ok());
    auto got = store_->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, data) << size;
    EXPECT_EQ(store_->Head(key)->size, size);
    EXPECT_EQ(mem_->Head(key)->size, size);
    std::string meta;
    ASSERT_TRUE(mem_->GetWithMeta(key, 0, 1, &meta).ok());
    EXPECT_LE(meta.size(), kMaxObjectMeta);
    EXPECT_EQ(Base64Decode(meta)->substr(8, 4), Be32(kSeg)) << size;
  }
  auto list = store_->List("obj/", "", 0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), sizes.size());
  for (const auto& info : *list) EXPECT_EQ(std::to_string(info.size), info.key.substr(4));
}

TEST_F(ChecksumMetaTest, RangedReadsAreOneRequest) {
  const uint64_t size = 5 * kSeg + 100;
  std::string data = RandomData(size, 42);
  ASSERT_TRUE(store_->Put("r", data).ok());
  struct Case {
    uint64_t off;
    int64_t len;
  };
  std::vector<Case> cases = {
      {0, 1},          {0, 10},          {1, static_cast<int64_t>(kSeg)}, {kSeg - 5, 10},
      {kSeg, static_cast<int64_t>(kSeg)}, {100, static_cast<int64_t>(3 * kSeg)},
      {5 * kSeg, 100}, {5 * kSeg + 50, 1000}, {size - 1, 1}, {size - 1, -1},
      {3 * kSeg + 7, -1}, {0, static_cast<int64_t>(size)}, {0, static_cast<int64_t>(size + 1000)},
      {0, -1},
  };
  for (const Case& c : cases) {
    std::string want = data.substr(c.off, c.len < 0 ? std::string::npos : c.len);
    EXPECT_EQ(GetsFor("r", c.off, c.len, want), 1u) << c.off << "+" << c.len;
  }
  // Past the end: nothing, whether or not the metadata comes back with the empty answer.
  for (const Case& c : std::vector<Case>{{size, 10}, {size + 5, -1}, {kSeg * 100, 1}, {10, 0}}) {
    auto got = store_->Get("r", c.off, c.len);
    ASSERT_TRUE(got.ok()) << c.off << "+" << c.len << ": " << got.status().ToString();
    EXPECT_EQ(*got, "");
  }
  ASSERT_TRUE(store_->Put("empty", "").ok());
  EXPECT_EQ(*store_->Get("empty"), "");
  EXPECT_EQ(*store_->Get("empty", 0, 10), "");
  EXPECT_EQ(store_->Get("missing", 3, 10).status().code(), ENOENT);
  EXPECT_EQ(store_->Get("missing").status().code(), ENOENT);
  EXPECT_EQ(store_->Head("missing").status().code(), ENOENT);
}

TEST_F(ChecksumMetaTest, ObjectsPastSixteenMiBUseLargerSegments) {
  std::string huge = RandomData((16 << 20) + 3 * kSeg + 5, 3);  // 260 segments of 64 KiB: too many
  ASSERT_TRUE(store_->Put("huge", huge).ok());
  std::string meta;
  ASSERT_TRUE(mem_->GetWithMeta("huge", 0, 1, &meta).ok());
  EXPECT_LE(meta.size(), kMaxObjectMeta);
  std::string table = *Base64Decode(meta);
  EXPECT_EQ(table.substr(8, 4), Be32(2 * kSeg));
  EXPECT_EQ(table.size(), 12u + 4 * 130);
  EXPECT_EQ(GetsFor("huge", 0, -1, huge), 1u);
  // A range within one 128 KiB segment needs the rest of it: a second request.
  EXPECT_EQ(GetsFor("huge", kSeg + 1, 5, huge.substr(kSeg + 1, 5)), 2u);
  EXPECT_EQ(GetsFor("huge", 2 * kSeg, static_cast<int64_t>(2 * kSeg), huge.substr(2 * kSeg, 2 * kSeg)), 1u);
  EXPECT_EQ(GetsFor("huge", huge.size() - 10, -1, huge.substr(huge.size() - 10)), 1u);
  uint64_t odd = (16 << 20) + kSeg + 3;  // in the segment starting at 16 MiB
  EXPECT_EQ(GetsFor("huge", odd, -1, huge.substr(odd)), 2u);
  Tamper("huge", [](std::string* data, std::string*) { (*data)[5 * kSeg + 1] ^= 1; });  // in segment 2
  EXPECT_EQ(store_->Get("huge", 5 * kSeg, 4).status().message(),
            "object huge is corrupt (checksum mismatch in segment 2)");
  EXPECT_TRUE(store_->Get("huge", 6 * kSeg, 4).ok());
}

TEST_F(ChecksumMetaTest, DamagedDataIsNeverReturned) {
  std::string data = RandomData(4 * kSeg, 5);
  ASSERT_TRUE(store_->Put("c", data).ok());
  Tamper("c", [](std::string* d, std::string*) { (*d)[2 * kSeg + 77] ^= 0x20; });
  for (auto got : {store_->Get("c"), store_->Get("c", 2 * kSeg + 70, 20),
                   store_->Get("c", kSeg, static_cast<int64_t>(3 * kSeg))}) {
    EXPECT_EQ(got.status().code(), EIO);
    EXPECT_EQ(got.status().message(), "object c is corrupt (checksum mismatch in segment 2)");
  }
  EXPECT_EQ(*store_->Get("c", 0, static_cast<int64_t>(2 * kSeg)), data.substr(0, 2 * kSeg));
  EXPECT_TRUE(store_->Get("c", 3 * kSeg, 10).ok());
}

// GetVerified hands over the table it checked the data against (the disk cache keeps it
// instead of hashing the block again): exactly the checksums of the data's segments, and
// nothing for a damaged object or one of larger segments.
TEST_F(ChecksumMetaTest, GetVerifiedGivesTheTableItCheckedTheDataAgainst) {
  std::string data = RandomData(3 * kSeg + 100, 6);
  ASSERT_TRUE(store_->Put("v", data).ok());
  std::vector<uint32_t> sums = {1, 2};
  mem_->ResetCounters();
  auto got = store_->GetVerified("v", &sums);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(mem_->gets(), 1u);
  std::vector<uint32_t> want;
  for (uint64_t off = 0; off < data.size(); off += kSeg) want.push_back(Checksum32(std::string_view(data).substr(off, kSeg)));
  EXPECT_EQ(sums, want);

  ASSERT_TRUE(store_->Put("empty", "").ok());
  ASSERT_TRUE(store_->GetVerified("empty", &sums).ok());
  EXPECT_TRUE(sums.empty());

  std::string huge = RandomData((16 << 20) + 3 * kSeg, 7);  // 128 KiB segments
  ASSERT_TRUE(store_->Put("huge", huge).ok());
  got = store_->GetVerified("huge", &sums);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, huge);
  EXPECT_TRUE(sums.empty()) << "a table of 128 KiB segments is not the 64 KiB one callers keep";

  Tamper("v", [](std::string* d, std::string*) { (*d)[kSeg + 3] ^= 1; });
  sums = {1};
  got = store_->GetVerified("v", &sums);
  EXPECT_EQ(got.status().message(), "object v is corrupt (checksum mismatch in segment 1)");
  EXPECT_TRUE(sums.empty());
}

TEST_F(ChecksumMetaTest, DamagedOrMissingTable) {
  std::string data = RandomData(2 * kSeg, 6);
  auto corrupt = [&](const std::string& key, const std::string& part) {
    for (auto got : {store_->Get(key), store_->Get(key, 5, 5), store_->Get(key, kSeg, 10)}) {
      EXPECT_EQ(got.status().code(), EIO) << key;
      EXPECT_NE(got.status().message().find(part), std::string::npos) << got.status().message();
    }
  };
  ASSERT_TRUE(mem_->Put("none", data).ok());  // no metadata at all
  corrupt("none", "object none is corrupt (no checksum table in its metadata");
  ASSERT_TRUE(mem_->PutWithMeta("junk", data, "not base64!").ok());
  corrupt("junk", "its checksum table is not base64");

  ASSERT_TRUE(store_->Put("sum", data).ok());
  Tamper("sum", [](std::string*, std::string* t) { (*t)[12 + 4 + 1] ^= 1; });  // checksum of segment 1
  EXPECT_EQ(store_->Get("sum").status().message(), "object sum is corrupt (checksum mismatch in segment 1)");
  EXPECT_TRUE(store_->Get("sum", 0, 10).ok());

  ASSERT_TRUE(store_->Put("magic", data).ok());
  Tamper("magic", [](std::string*, std::string* t) { (*t)[0] = 'X'; });
  corrupt("magic", "bad header magic");
  ASSERT_TRUE(store_->Put("seg", data).ok());
  Tamper("seg", [](std::string*, std::string* t) { (*t)[9] ^= 1; });
  corrupt("seg", "unsupported segment size");
  ASSERT_TRUE(store_->Put("short", data).ok());
  Tamper("short", [](std::string*, std::string* t) { t->resize(t->size() - 4); });
  corrupt("short", "wrong length");
  ASSERT_TRUE(store_->Put("len", data.substr(0, 2 * kSeg - 2)).ok());  // the table claims a byte more
  Tamper("len", [](std::string*, std::string* t) { (*t)[7] ^= 1; });
  EXPECT_NE(store_->Get("len").status().message().find("is truncated"), std::string::npos);
}

TEST_F(ChecksumMetaTest, TruncatedOrExtendedObject) {
  std::string data = RandomData(3 * kSeg + 1000, 7);
  ASSERT_TRUE(store_->Put("t", data).ok());
  Tamper("t", [](std::string* d, std::string*) { d->resize(d->size() - 10); });
  for (auto got : {store_->Get("t"), store_->Get("t", 3 * kSeg, 100)}) {
    EXPECT_EQ(got.status().code(), EIO);
    EXPECT_NE(got.status().message().find("object t is truncated"), std::string::npos) << got.status().message();
  }
  EXPECT_TRUE(store_->Get("t", 0, 100).ok());  // the intact prefix is still readable

  ASSERT_TRUE(store_->Put("e", "abcdef").ok());
  Tamper("e", [](std::string* d, std::string*) { d->append("zz"); });
  EXPECT_EQ(store_->Get("e").status().code(), EIO);
  EXPECT_EQ(store_->Get("e", 1, 2).status().code(), EIO);
}

TEST_F(ChecksumMetaTest, MultipartIsRefusedAndFailuresPassThrough) {
  auto id = store_->CreateMultipart("mp");
  EXPECT_EQ(id.status().code(), EOPNOTSUPP);
  EXPECT_NE(id.status().message().find("object metadata"), std::string::npos) << id.status().message();
  ASSERT_TRUE(store_->Put("k", "v").ok());
  mem_->FailGets(ETIMEDOUT, 1);
  EXPECT_EQ(store_->Get("k").status().code(), ETIMEDOUT);
  mem_->FailPuts(ENOSPC, 1);
  EXPECT_EQ(store_->Put("k", "w").code(), ENOSPC);
  EXPECT_EQ(*store_->Get("k"), "v");
}

TEST(CreateObjectStore, TablesGoToMetadataOnlyWhereTheStoreKeepsIt) {
  StorageSpec spec;
  spec.storage = "mem";
  spec.bucket = "meta-layout";
  spec.checksums_in_meta = true;
  auto store = CreateObjectStore(spec);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("x", "hello").ok());
  spec.checksums_in_meta = false;
  auto raw = CreateRawObjectStore(spec);
  std::string meta;
  EXPECT_EQ(*(*raw)->GetWithMeta("x", 0, -1, &meta), "hello");
  EXPECT_FALSE(meta.empty());

  char tmpl[] = "/tmp/tierfs_meta_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  spec = StorageSpec{};
  spec.storage = "file";
  spec.bucket = tmpl;
  spec.checksums_in_meta = true;  // a directory keeps no metadata: inline
  auto file = CreateObjectStore(spec);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Init().ok());
  ASSERT_TRUE((*file)->Put("x", "hello").ok());
  EXPECT_EQ(*(*file)->Get("x"), "hello");
  EXPECT_EQ((*CreateRawObjectStore(spec))->Head("x")->size, 12u + 4 + 5);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace tierfs
