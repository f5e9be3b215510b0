#include "object/mem_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tierfs {
namespace {

std::vector<std::string> Keys(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> keys;
  for (const auto& i : infos) keys.push_back(i.key);
  return keys;
}

TEST(MemStore, PutGetHeadDelete) {
  MemStore store("unit");
  EXPECT_EQ(store.Describe(), "mem://unit/");
  ASSERT_TRUE(store.Init().ok());
  ASSERT_TRUE(store.Put("a/b", "hello world").ok());
  EXPECT_EQ(*store.Get("a/b"), "hello world");
  EXPECT_EQ(*store.Get("a/b", 6), "world");
  EXPECT_EQ(*store.Get("a/b", 6, 3), "wor");
  EXPECT_EQ(*store.Get("a/b", 6, 100), "world");
  EXPECT_EQ(*store.Get("a/b", 100, 5), "");
  EXPECT_EQ(*store.Get("a/b", 0, 0), "");
  auto head = store.Head("a/b");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, 11u);
  EXPECT_GT(head->mtime_ns, 0);
  EXPECT_EQ(store.ObjectCount(), 1u);
  EXPECT_EQ(store.TotalBytes(), 11u);

  ASSERT_TRUE(store.Delete("a/b").ok());
  auto gone = store.Get("a/b");
  EXPECT_EQ(gone.status().code(), ENOENT);
  EXPECT_EQ(gone.status().message(), "object a/b not found in mem://unit/");
  EXPECT_EQ(store.Head("a/b").status().code(), ENOENT);
  EXPECT_TRUE(store.Delete("a/b").ok());
}

TEST(MemStore, List) {
  MemStore store;
  for (std::string k : {"a-b", "a/b", "a/c/d", "a0", "b/1", "b/2"}) ASSERT_TRUE(store.Put(k, k).ok());
  EXPECT_EQ(Keys(*store.List("", "", 0)), (std::vector<std::string>{"a-b", "a/b", "a/c/d", "a0", "b/1", "b/2"}));
  EXPECT_EQ(Keys(*store.List("a/", "", 0)), (std::vector<std::string>{"a/b", "a/c/d"}));
  EXPECT_EQ(Keys(*store.List("a/", "a/b", 0)), (std::vector<std::string>{"a/c/d"}));
  EXPECT_EQ(Keys(*store.List("", "a/", 2)), (std::vector<std::string>{"a/b", "a/c/d"}));
  EXPECT_EQ(Keys(*store.List("b", "a", 1)), (std::vector<std::string>{"b/1"}));
  EXPECT_TRUE(store.List("b", "b/2", 0)->empty());
  EXPECT_TRUE(store.List("c", "", 0)->empty());
  EXPECT_EQ(store.List("", "", 0)->at(0).size, 3u);
  EXPECT_EQ(store.lists(), 8u);
}

TEST(MemStore, InjectedFailuresAndCounters) {
  MemStore store;
  ASSERT_TRUE(store.Put("k", "v").ok());

  store.FailPuts(EIO, 2);
  Status st = store.Put("k", "new");
  EXPECT_EQ(st.code(), EIO);
  EXPECT_NE(st.message().find("injected"), std::string::npos);
  EXPECT_NE(st.message().find("k"), std::string::npos);
  EXPECT_EQ(store.Put("k", "new").code(), EIO);
  EXPECT_EQ(*store.Get("k"), "v");  // failed puts change nothing
  EXPECT_TRUE(store.Put("k", "new").ok());

  store.FailPuts(ENOSPC);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(store.Put("x", "y").code(), ENOSPC);
  store.FailPuts(0);
  EXPECT_TRUE(store.Put("x", "y").ok());

  store.FailGets(ETIMEDOUT, 1);
  EXPECT_EQ(store.Get("k").status().code(), ETIMEDOUT);
  EXPECT_EQ(*store.Get("k"), "new");

  store.FailDeletes(EIO);
  EXPECT_EQ(store.Delete("k").code(), EIO);
  EXPECT_TRUE(store.Head("k").ok());
  store.FailDeletes(0);
  EXPECT_TRUE(store.Delete("k").ok());

  EXPECT_EQ(store.puts(), 10u);
  EXPECT_EQ(store.gets(), 3u);
  EXPECT_EQ(store.heads(), 1u);
  EXPECT_EQ(store.deletes(), 2u);
  store.ResetCounters();
  EXPECT_EQ(store.puts(), 0u);
  EXPECT_EQ(store.gets(), 0u);
}

TEST(MemStore, HooksRunWithoutTheLock) {
  MemStore store;
  ASSERT_TRUE(store.Put("k", "v").ok());
  std::vector<std::string> seen;
  store.SetGetHook([&](const std::string& key) {
    seen.push_back(key);
    // Calling back into the store from a hook must not deadlock.
    EXPECT_TRUE(store.Head(key).ok());
  });
  store.SetPutHook([&](const std::string& key) { seen.push_back("put:" + key); });
  EXPECT_TRUE(store.Get("k").ok());
  EXPECT_TRUE(store.Put("j", "w").ok());
  store.SetGetHook(nullptr);
  store.SetPutHook(nullptr);
  EXPECT_TRUE(store.Get("j").ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"k", "put:j"}));
}

TEST(MemStore, Multipart) {
  MemStore store;
  auto id = store.CreateMultipart("big");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store.UploadPart("big", *id, 2, "world").ok());
  ASSERT_TRUE(store.UploadPart("big", *id, 1, "hello ").ok());
  EXPECT_EQ(store.Head("big").status().code(), ENOENT);
  EXPECT_EQ(store.CompleteMultipart("big", *id, 3).code(), EINVAL);  // part 3 missing
  EXPECT_EQ(store.UploadPart("other", *id, 1, "x").code(), ENOENT);  // wrong key
  EXPECT_EQ(store.UploadPart("big", *id, 0, "x").code(), EINVAL);
  ASSERT_TRUE(store.CompleteMultipart("big", *id, 2).ok());
  EXPECT_EQ(*store.Get("big"), "hello world");
  EXPECT_EQ(store.CompleteMultipart("big", *id, 2).code(), ENOENT);

  auto id2 = store.CreateMultipart("aborted");
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(store.UploadPart("aborted", *id2, 1, "x").ok());
  ASSERT_TRUE(store.AbortMultipart("aborted", *id2).ok());
  EXPECT_EQ(store.CompleteMultipart("aborted", *id2, 1).code(), ENOENT);
  EXPECT_EQ(store.Head("aborted").status().code(), ENOENT);
}

TEST(MemStore, ConcurrentUse) {
  MemStore store;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        if (!store.Put(key, key).ok()) ++failures;
        auto got = store.Get(key);
        if (!got.ok() || *got != key) ++failures;
        if (!store.List("t" + std::to_string(t) + "/", "", 5).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store.ObjectCount(), 1600u);
  EXPECT_EQ(store.puts(), 1600u);
}

}  // namespace
}  // namespace tierfs
