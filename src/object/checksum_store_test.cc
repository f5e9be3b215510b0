#include "object/checksum_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "common/hash.h"
#include "object/file_store.h"
#include "object/mem_store.h"

namespace tierfs {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeg = kChecksumSegment;

std::string RandomData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

uint64_t HeaderSize(uint64_t len) { return 12 + 4 * ((len + kSeg - 1) / kSeg); }

class ChecksumStoreTest : public ::testing::Test {
 protected:
  ChecksumStoreTest() {
    auto mem = std::make_unique<MemStore>("cs");
    mem_ = mem.get();
    store_ = std::make_unique<ChecksumStore>(std::move(mem));
  }
  // Rewrites the raw stored object through f.
  void Tamper(const std::string& key, const std::function<void(std::string*)>& f) {
    std::string raw = *mem_->Get(key);
    f(&raw);
    ASSERT_TRUE(mem_->Put(key, raw).ok());
  }
  MemStore* mem_;
  std::unique_ptr<ChecksumStore> store_;
};

TEST_F(ChecksumStoreTest, StoredFormat) {
  std::string data = RandomData(kSeg + 10, 1);
  ASSERT_TRUE(store_->Put("k", data).ok());
  std::string raw = *mem_->Get("k");
  ASSERT_EQ(raw.size(), 12 + 8 + data.size());
  EXPECT_EQ(raw.substr(0, 4), "TFB1");
  EXPECT_EQ(raw.substr(4, 4), std::string("\x00\x01\x00\x0a", 4));  // length, big-endian
  EXPECT_EQ(raw.substr(8, 4), std::string("\x00\x01\x00\x00", 4));  // 64 KiB segments
  uint32_t sum0 = Checksum32(std::string_view(data).substr(0, kSeg));
  std::string be;
  for (int i = 3; i >= 0; --i) be.push_back(static_cast<char>(sum0 >> (8 * i)));
  EXPECT_EQ(raw.substr(12, 4), be);
  EXPECT_EQ(raw.substr(20), data);
  EXPECT_EQ(store_->Describe(), "mem://cs/");
}

TEST_F(ChecksumStoreTest, RoundTripAndSizesAtSegmentBoundaries) {
  std::vector<uint64_t> sizes = {0, 1, 100, 1024};
  for (uint64_t k = 1; k <= 4; ++k) {
    sizes.push_back(k * kSeg - 1);
    sizes.push_back(k * kSeg);
    sizes.push_back(k * kSeg + 1);
  }
  for (uint64_t size : sizes) {
    std::string key = "obj/" + std::to_string(size);
    std::string data = RandomData(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(store_->Put(key, data).ok());
    auto got = store_->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, data) << size;
    auto head = store_->Head(key);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    EXPECT_EQ(head->size, size);
    EXPECT_EQ(mem_->Head(key)->size, HeaderSize(size) + size);
  }
  auto list = store_->List("obj/", "", 0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), sizes.size());
  for (const auto& info : *list) EXPECT_EQ(std::to_string(info.size), info.key.substr(4));
}

TEST_F(ChecksumStoreTest, RangedReads) {
  const uint64_t size = 5 * kSeg + 100;
  std::string data = RandomData(size, 42);
  ASSERT_TRUE(store_->Put("r", data).ok());
  struct Case {
    uint64_t off;
    int64_t len;
  };
  std::vector<Case> cases = {
      {0, 1},          {0, 10},          {1, static_cast<int64_t>(kSeg)}, {kSeg - 5, 10},  // spans 0-1
      {kSeg, static_cast<int64_t>(kSeg)}, {100, static_cast<int64_t>(3 * kSeg)},          // spans 4 segments
      {5 * kSeg, 100}, {5 * kSeg + 50, 1000}, {size - 1, 1}, {size - 1, -1},                // at the end
      {3 * kSeg + 7, -1}, {0, static_cast<int64_t>(size)}, {0, static_cast<int64_t>(size + 1000)},
      {size, 10},      {size + 5, -1},   {kSeg * 100, 1},  {10, 0},
  };
  for (const Case& c : cases) {
    auto got = store_->Get("r", c.off, c.len);
    ASSERT_TRUE(got.ok()) << c.off << "+" << c.len << ": " << got.status().ToString();
    std::string want = c.off >= size ? "" : data.substr(c.off, c.len < 0 ? std::string::npos : c.len);
    EXPECT_EQ(*got, want) << c.off << "+" << c.len;
  }
}

TEST_F(ChecksumStoreTest, InnerReadsPerGet) {
  std::string small = RandomData(500, 1);
  std::string large = RandomData(10 * kSeg, 2);
  std::string huge = RandomData(16 * 1024 * 1024 + 3 * kSeg + 5, 3);  // 260 segments
  ASSERT_TRUE(store_->Put("small", small).ok());
  ASSERT_TRUE(store_->Put("large", large).ok());
  ASSERT_TRUE(store_->Put("huge", huge).ok());

  auto reads = [&](const std::string& key, uint64_t off, int64_t len, const std::string& want) {
    mem_->ResetCounters();
    auto got = store_->Get(key, off, len);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(*got, want) << key << " " << off << "+" << len;
    }
    return mem_->gets();
  };
  EXPECT_EQ(reads("large", 0, -1, large), 1u);                                    // whole object
  EXPECT_EQ(reads("small", 10, 20, small.substr(10, 20)), 1u);                    // header read has it all
  EXPECT_EQ(reads("large", 7 * kSeg + 3, 100, large.substr(7 * kSeg + 3, 100)), 2u);  // header + 1 segment
  EXPECT_EQ(reads("huge", huge.size() - 10, -1, huge.substr(huge.size() - 10)), 3u);  // long header
  EXPECT_EQ(reads("huge", 0, -1, huge), 1u);
  EXPECT_EQ(reads("huge", 1, 5, huge.substr(1, 5)), 3u);
}

TEST_F(ChecksumStoreTest, MissingObject) {
  auto got = store_->Get("no/such/key");
  EXPECT_EQ(got.status().code(), ENOENT);
  EXPECT_NE(got.status().message().find("no/such/key"), std::string::npos);
  EXPECT_EQ(store_->Get("no/such/key", 10, 10).status().code(), ENOENT);
  EXPECT_EQ(store_->Head("no/such/key").status().code(), ENOENT);
  EXPECT_TRUE(store_->Delete("no/such/key").ok());
}

TEST_F(ChecksumStoreTest, FlippedDataByte) {
  std::string data = RandomData(4 * kSeg, 5);
  ASSERT_TRUE(store_->Put("c", data).ok());
  Tamper("c", [&](std::string* raw) { (*raw)[HeaderSize(data.size()) + 2 * kSeg + 77] ^= 0x20; });

  auto whole = store_->Get("c");
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), EIO);
  EXPECT_EQ(whole.status().message(), "object c is corrupt (checksum mismatch in segment 2)");

  auto ranged = store_->Get("c", 2 * kSeg + 70, 20);
  EXPECT_EQ(ranged.status().code(), EIO);
  EXPECT_EQ(ranged.status().message(), "object c is corrupt (checksum mismatch in segment 2)");
  // A range spanning the bad segment fails too; untouched segments still read fine.
  EXPECT_EQ(store_->Get("c", kSeg, static_cast<int64_t>(3 * kSeg)).status().code(), EIO);
  auto good = store_->Get("c", 0, static_cast<int64_t>(2 * kSeg));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, data.substr(0, 2 * kSeg));
  EXPECT_TRUE(store_->Get("c", 3 * kSeg, 10).ok());
}

TEST_F(ChecksumStoreTest, FlippedChecksumOrHeader) {
  std::string data = RandomData(2 * kSeg, 6);
  ASSERT_TRUE(store_->Put("h", data).ok());
  Tamper("h", [](std::string* raw) { (*raw)[12 + 4 + 1] ^= 1; });  // checksum of segment 1
  EXPECT_EQ(store_->Get("h").status().message(), "object h is corrupt (checksum mismatch in segment 1)");
  EXPECT_TRUE(store_->Get("h", 0, 10).ok());

  ASSERT_TRUE(store_->Put("m", data).ok());
  Tamper("m", [](std::string* raw) { (*raw)[0] = 'X'; });
  for (auto got : {store_->Get("m"), store_->Get("m", 5, 5)}) {
    EXPECT_EQ(got.status().code(), EIO);
    EXPECT_NE(got.status().message().find("object m is corrupt"), std::string::npos) << got.status().message();
  }

  ASSERT_TRUE(store_->Put("s", data).ok());
  Tamper("s", [](std::string* raw) { (*raw)[9] ^= 1; });  // segment size
  EXPECT_EQ(store_->Get("s").status().code(), EIO);
  EXPECT_EQ(store_->Get("s", 1, 1).status().code(), EIO);

  ASSERT_TRUE(store_->Put("l", data).ok());
  Tamper("l", [](std::string* raw) { (*raw)[7] ^= 1; });  // data length off by one
  EXPECT_EQ(store_->Get("l").status().code(), EIO);
  EXPECT_EQ(store_->Get("l", kSeg, 10).status().code(), EIO);
}

TEST_F(ChecksumStoreTest, TruncatedOrExtendedObject) {
  std::string data = RandomData(3 * kSeg + 1000, 7);
  ASSERT_TRUE(store_->Put("t", data).ok());
  Tamper("t", [](std::string* raw) { raw->resize(raw->size() - 10); });
  auto whole = store_->Get("t");
  EXPECT_EQ(whole.status().code(), EIO);
  EXPECT_NE(whole.status().message().find("object t is truncated"), std::string::npos) << whole.status().message();
  auto tail = store_->Get("t", 3 * kSeg, 100);
  EXPECT_EQ(tail.status().code(), EIO);
  EXPECT_NE(tail.status().message().find("object t is truncated"), std::string::npos) << tail.status().message();
  EXPECT_TRUE(store_->Get("t", 0, 100).ok());  // the intact prefix is still readable
  // Head derives the data size from the stored size without reading, so it only notices
  // stored sizes that no object can have.
  Tamper("t", [](std::string* raw) { raw->resize(12 + 3 * (kSeg + 4) + 2); });  // in a gap
  EXPECT_EQ(store_->Head("t").status().code(), EIO);
  Tamper("t", [](std::string* raw) { raw->resize(13); });
  auto head = store_->Head("t");
  EXPECT_EQ(head.status().code(), EIO);
  EXPECT_NE(head.status().message().find("object t is corrupt"), std::string::npos);

  ASSERT_TRUE(store_->Put("tiny", "abc").ok());
  Tamper("tiny", [](std::string* raw) { raw->resize(2); });
  EXPECT_NE(store_->Get("tiny").status().message().find("is truncated"), std::string::npos);
  EXPECT_NE(store_->Get("tiny", 1, 1).status().message().find("is truncated"), std::string::npos);

  ASSERT_TRUE(store_->Put("short", "abcdef").ok());
  Tamper("short", [](std::string* raw) { raw->resize(raw->size() - 1); });
  EXPECT_NE(store_->Get("short", 1, 1).status().message().find("is truncated"), std::string::npos);

  ASSERT_TRUE(store_->Put("e", "abcdef").ok());
  Tamper("e", [](std::string* raw) { raw->append("zz"); });
  EXPECT_EQ(store_->Get("e").status().code(), EIO);
  EXPECT_EQ(store_->Get("e", 1, 2).status().code(), EIO);
}

TEST_F(ChecksumStoreTest, Multipart) {
  std::string p1 = RandomData(2 * kSeg, 1), p2 = RandomData(3 * kSeg, 2), p3 = RandomData(1234, 3);
  auto id = store_->CreateMultipart("mp");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("mp", *id, 3, p3).ok());
  ASSERT_TRUE(store_->UploadPart("mp", *id, 1, p1).ok());
  ASSERT_TRUE(store_->UploadPart("mp", *id, 2, p2).ok());
  ASSERT_TRUE(store_->CompleteMultipart("mp", *id, 3).ok());
  std::string all = p1 + p2 + p3;
  auto got = store_->Get("mp");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, all);
  EXPECT_EQ(*store_->Get("mp", 2 * kSeg - 5, 10), all.substr(2 * kSeg - 5, 10));
  EXPECT_EQ(store_->Head("mp")->size, all.size());
  // Stored exactly as a single Put would store it.
  ASSERT_TRUE(store_->Put("single", all).ok());
  EXPECT_EQ(*mem_->Get("mp"), *mem_->Get("single"));
  EXPECT_EQ(store_->CompleteMultipart("mp", *id, 3).code(), ENOENT);
}

TEST_F(ChecksumStoreTest, MultipartErrors) {
  auto id = store_->CreateMultipart("bad");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->UploadPart("bad", *id, 1, "not a multiple of 64 KiB").ok());
  ASSERT_TRUE(store_->UploadPart("bad", *id, 2, "last").ok());
  Status st = store_->CompleteMultipart("bad", *id, 2);
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_NE(st.message().find("multiple of 64 KiB"), std::string::npos) << st.message();
  EXPECT_EQ(store_->CompleteMultipart("bad", *id, 3).code(), EINVAL);  // part 3 missing
  EXPECT_EQ(store_->UploadPart("bad", "nope", 1, "x").code(), ENOENT);
  EXPECT_EQ(store_->UploadPart("other", *id, 1, "x").code(), ENOENT);
  // A single short part is fine.
  ASSERT_TRUE(store_->CompleteMultipart("bad", *id, 1).ok());
  EXPECT_EQ(*store_->Get("bad"), "not a multiple of 64 KiB");

  auto id2 = store_->CreateMultipart("gone");
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(store_->UploadPart("gone", *id2, 1, "x").ok());
  ASSERT_TRUE(store_->AbortMultipart("gone", *id2).ok());
  EXPECT_EQ(store_->CompleteMultipart("gone", *id2, 1).code(), ENOENT);
  EXPECT_EQ(store_->Head("gone").status().code(), ENOENT);
}

TEST_F(ChecksumStoreTest, InnerFailuresPassThrough) {
  ASSERT_TRUE(store_->Put("k", "v").ok());
  mem_->FailGets(ETIMEDOUT, 1);
  EXPECT_EQ(store_->Get("k").status().code(), ETIMEDOUT);
  mem_->FailPuts(ENOSPC, 1);
  EXPECT_EQ(store_->Put("k", "w").code(), ENOSPC);
  EXPECT_EQ(*store_->Get("k"), "v");
}

// The same checks against real files: flip and cut bytes on disk.
class ChecksumFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/tierfs_checksum_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    store_ = std::make_unique<ChecksumStore>(std::make_unique<FileStore>(dir_));
    ASSERT_TRUE(store_->Init().ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
  std::unique_ptr<ChecksumStore> store_;
};

TEST_F(ChecksumFileTest, DetectsFlippedByteOnDisk) {
  std::string data = RandomData(3 * kSeg, 9);
  ASSERT_TRUE(store_->Put("vol/blk/1", data).ok());
  EXPECT_EQ(*store_->Get("vol/blk/1"), data);
  EXPECT_EQ(store_->Head("vol/blk/1")->size, data.size());
  EXPECT_EQ(store_->Describe(), "file://" + dir_ + "/");

  std::string path = dir_ + "/vol/blk/1";
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  off_t pos = static_cast<off_t>(HeaderSize(data.size()) + kSeg + 12345);
  char c;
  ASSERT_EQ(pread(fd, &c, 1, pos), 1);
  c ^= 0x01;
  ASSERT_EQ(pwrite(fd, &c, 1, pos), 1);
  close(fd);

  auto got = store_->Get("vol/blk/1");
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_EQ(got.status().message(), "object vol/blk/1 is corrupt (checksum mismatch in segment 1)");
  EXPECT_EQ(store_->Get("vol/blk/1", kSeg + 12000, 1000).status().code(), EIO);
  EXPECT_TRUE(store_->Get("vol/blk/1", 0, 1000).ok());

  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(HeaderSize(data.size()) + kSeg)), 0);
  auto cut = store_->Get("vol/blk/1");
  EXPECT_EQ(cut.status().code(), EIO);
  EXPECT_NE(cut.status().message().find("object vol/blk/1 is truncated"), std::string::npos);
  EXPECT_NE(store_->Get("vol/blk/1", 2 * kSeg, 10).status().message().find("is truncated"), std::string::npos);
}

TEST_F(ChecksumFileTest, Multipart) {
  std::string p1 = RandomData(kSeg * 16, 1), p2 = RandomData(777, 2);
  auto id = store_->CreateMultipart("m/obj");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE(store_->UploadPart("m/obj", *id, 1, p1).ok());
  ASSERT_TRUE(store_->UploadPart("m/obj", *id, 2, p2).ok());
  ASSERT_TRUE(store_->CompleteMultipart("m/obj", *id, 2).ok());
  EXPECT_EQ(*store_->Get("m/obj"), p1 + p2);
  EXPECT_EQ(*store_->Get("m/obj", kSeg * 16 - 1, 2), (p1 + p2).substr(kSeg * 16 - 1, 2));
  auto list = store_->List("m/", "", 0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->at(0).size, p1.size() + p2.size());
}

TEST(CreateObjectStore, StorageTypes) {
  // s3 needs a bucket URL; creating the store does no I/O, so any host will do.
  auto s3_bad = CreateObjectStore("s3", "bucket");
  EXPECT_EQ(s3_bad.status().code(), EINVAL);
  EXPECT_NE(s3_bad.status().message().find("expected http(s)://HOST[:PORT]/BUCKET"), std::string::npos)
      << s3_bad.status().message();
  auto s3 = CreateObjectStore("s3", "http://127.0.0.1:9/bucket");
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ((*s3)->Describe(), "s3://127.0.0.1:9/bucket/");
  // rados connects on first use, so creating the store succeeds without a cluster.
  auto rados = CreateObjectStore("rados", "pool");
  ASSERT_TRUE(rados.ok()) << rados.status().ToString();
  EXPECT_EQ((*rados)->Describe(), "rados://pool");
  auto bogus = CreateObjectStore("ftp", "x");
  EXPECT_EQ(bogus.status().code(), EINVAL);
  EXPECT_EQ(bogus.status().message(), "unknown storage type ftp (supported: file, mem, s3, rados, azure)");
  EXPECT_EQ(CreateObjectStore("file", "").status().code(), EINVAL);
}

TEST(CreateObjectStore, FileIsChecksummedAndAbsolute) {
  std::string tmpl = fs::temp_directory_path().string() + "/tierfs_create_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  auto store = CreateObjectStore("file", tmpl + "/b");
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Describe(), "file://" + tmpl + "/b/");
  ASSERT_TRUE((*store)->Init().ok());
  ASSERT_TRUE((*store)->Put("x", "data").ok());
  EXPECT_EQ(fs::file_size(tmpl + "/b/x"), 12u + 4u + 4u);  // header + one checksum + data
  EXPECT_EQ(*(*store)->Get("x"), "data");

  auto relative = CreateObjectStore("file", "rel/dir");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ((*relative)->Describe(), "file://" + fs::current_path().string() + "/rel/dir/");
  fs::remove_all(tmpl);
}

TEST(CreateObjectStore, MemBucketsAreSharedByName) {
  auto a = CreateObjectStore("mem", "shared-test");
  auto b = CreateObjectStore("mem", "shared-test");
  auto other = CreateObjectStore("mem", "other-test");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ((*a)->Describe(), "mem://shared-test/");
  ASSERT_TRUE((*a)->Init().ok());
  ASSERT_TRUE((*a)->Put("k", "from a").ok());
  EXPECT_EQ(*(*b)->Get("k"), "from a");
  EXPECT_EQ(*(*b)->Get("k", 5, 1), "a");
  EXPECT_EQ((*other)->Get("k").status().code(), ENOENT);
  a->reset();  // the bucket outlives its clients
  auto c = CreateObjectStore("mem", "shared-test");
  EXPECT_EQ(*(*c)->Get("k"), "from a");
}

// The inline layout's GetVerified: the table from the object's header, checked against the
// data (checksum_meta_test.cc has the metadata layout).
TEST_F(ChecksumStoreTest, GetVerifiedGivesTheTableItCheckedTheDataAgainst) {
  std::string data = RandomData(2 * kSeg + 9, 8);
  ASSERT_TRUE(store_->Put("v", data).ok());
  std::vector<uint32_t> sums;
  auto got = store_->GetVerified("v", &sums);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(sums, (std::vector<uint32_t>{Checksum32(std::string_view(data).substr(0, kSeg)),
                                         Checksum32(std::string_view(data).substr(kSeg, kSeg)),
                                         Checksum32(std::string_view(data).substr(2 * kSeg))}));
  Tamper("v", [](std::string* raw) { raw->back() ^= 1; });
  got = store_->GetVerified("v", &sums);
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_TRUE(sums.empty());
  // Stores that verify nothing give no table.
  MemStore plain("plain");
  ASSERT_TRUE(plain.Put("p", data).ok());
  sums = {5};
  ASSERT_TRUE(plain.GetVerified("p", &sums).ok());
  EXPECT_TRUE(sums.empty());
}

}  // namespace
}  // namespace tierfs
