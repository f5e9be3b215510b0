#include "object/read_through_store.h"

#include <gtest/gtest.h>

namespace tierfs {
namespace {

struct Stores {
  std::unique_ptr<ObjectStore> store;  // first reading through to second
  std::unique_ptr<ObjectStore> first_raw, second_raw, second;
};

std::unique_ptr<ObjectStore> Open(const StorageSpec& spec, bool raw = false) {
  auto r = raw ? CreateRawObjectStore(spec) : CreateObjectStore(spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(*r);
}

// Checksummed mem stores as CreateObjectStore makes them (mem stores of one name share
// their objects within the process), and raw views of the same objects.
Stores Make(const std::string& name, WriteBoth both = WriteBoth::kNo) {
  Stores s;
  StorageSpec a, b;
  a.storage = b.storage = "mem";
  a.bucket = name + "-first";
  b.bucket = name + "-second";
  s.store = WithReadThrough(Open(a), Open(b), [](const std::string& k) { return k != "own"; }, both);
  s.second = Open(b);
  s.first_raw = Open(a, true);
  s.second_raw = Open(b, true);
  return s;
}

TEST(ReadThroughStore, ReadsTheSecondOnlyForWhatTheFirstLacks) {
  Stores s = Make("rt1");
  ASSERT_TRUE(s.store->Put("k", "mirror's").ok());
  ASSERT_TRUE(s.second->Put("k", "primary's").ok());
  ASSERT_TRUE(s.second->Put("only-primary", "0123456789").ok());
  EXPECT_EQ(*s.store->Get("k"), "mirror's");
  EXPECT_EQ(*s.store->Get("only-primary", 2, 3), "234");
  EXPECT_EQ(s.store->Head("only-primary")->size, 10u);
  EXPECT_EQ(s.store->Get("nowhere").status().code(), ENOENT);
  EXPECT_EQ(s.store->Head("nowhere").status().code(), ENOENT);
  // Keys it is not told to read through are the first store's alone.
  ASSERT_TRUE(s.second->Put("own", "primary's own").ok());
  EXPECT_EQ(s.store->Get("own").status().code(), ENOENT);
  EXPECT_EQ(s.store->Head("own").status().code(), ENOENT);
  // Listings and writes are the first store's alone.
  auto listed = s.store->List("", "", 100);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, "k");
  ASSERT_TRUE(s.store->Delete("only-primary").ok());
  EXPECT_EQ(*s.second->Get("only-primary"), "0123456789");
}

TEST(ReadThroughStore, VerifiesWhatItReadsThroughAndDoesNotHideTheFirstStoresErrors) {
  Stores s = Make("rt2");
  ASSERT_TRUE(s.second->Put("b", std::string(100000, 'x')).ok());
  // Damage the primary's copy: the read through fails with the checksum error.
  std::string raw = *s.second_raw->Get("b");
  raw[raw.size() - 10] ^= 1;
  ASSERT_TRUE(s.second_raw->Put("b", raw).ok());
  auto bad = s.store->Get("b");
  EXPECT_EQ(bad.status().code(), EIO) << bad.status().ToString();
  // A damaged object in the first store is an error, not a reason to read the second.
  ASSERT_TRUE(s.second->Put("c", "good").ok());
  ASSERT_TRUE(s.first_raw->Put("c", "not a checksummed object").ok());
  EXPECT_EQ(s.store->Get("c").status().code(), EIO);
}

}  // namespace
// A mirror's gc deletes from the mirror's own store only; a mirror's writing client
// (WriteBoth) writes and deletes the primary's copy first, and the mirror's too.
TEST(ReadThroughStore, WritesAndDeletesReachTheSecondOnlyWhenAskedTo) {
  Stores s = Make("rt3");
  ASSERT_TRUE(s.second->Put("k", "primary's").ok());
  ASSERT_TRUE(s.store->Put("k", "mirror's").ok());
  ASSERT_TRUE(s.store->Delete("k").ok());
  EXPECT_EQ(*s.second->Get("k"), "primary's");
  EXPECT_EQ(*s.store->Get("k"), "primary's");  // read through again

  Stores w = Make("rt4", WriteBoth::kYes);
  ASSERT_TRUE(w.store->Put("blk", "data").ok());
  EXPECT_EQ(*w.second->Get("blk"), "data");
  EXPECT_TRUE(w.first_raw->Head("blk").ok());
  ASSERT_TRUE(w.store->Put("own", "the mirror's alone").ok());  // not a block: first only
  EXPECT_EQ(w.second->Get("own").status().code(), ENOENT);
  ASSERT_TRUE(w.store->Delete("blk").ok());
  EXPECT_EQ(w.second->Get("blk").status().code(), ENOENT);
  EXPECT_EQ(w.first_raw->Head("blk").status().code(), ENOENT);
}

}  // namespace tierfs
