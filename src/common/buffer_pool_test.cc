#include "common/buffer_pool.h"

#include <gtest/gtest.h>

#include <thread>

namespace tierfs {

TEST(BufferPool, RecyclesSharedBlocks) {
  auto pool = BufferPool::Create(1 << 20);
  std::string a = pool->Take(60000);
  EXPECT_GE(a.capacity(), 60000u);
  EXPECT_TRUE(a.empty());
  a.append(60000, 'x');
  const char* mem = a.data();
  {
    auto block = pool->Share(std::move(a));
    EXPECT_EQ(block->size(), 60000u);
    EXPECT_EQ(pool->idle_bytes(), 0u);
  }
  EXPECT_GT(pool->idle_bytes(), 0u);
  std::string b = pool->Take(50000);
  EXPECT_EQ(b.data(), mem);  // the same memory came back
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool->idle_bytes(), 0u);
}

TEST(BufferPool, BoundsIdleMemory) {
  auto pool = BufferPool::Create(100000);
  std::string a = pool->Take(65536), b = pool->Take(65536);
  pool->Give(std::move(a));
  pool->Give(std::move(b));  // over the limit: freed
  EXPECT_LE(pool->idle_bytes(), 100000u);
  EXPECT_GT(pool->idle_bytes(), 0u);
}

TEST(BufferPool, BlockOutlivesItsPoolHandle) {
  std::shared_ptr<const std::string> block;
  {
    auto pool = BufferPool::Create(1 << 20);
    std::string s = pool->Take(4096);
    s = "data";
    block = pool->Share(std::move(s));
  }
  EXPECT_EQ(*block, "data");
  block.reset();  // returns to a pool kept alive by the block itself
}

TEST(BufferPool, TakeSizedReusesABufferWithoutClearingIt) {
  auto pool = BufferPool::Create(1 << 20);
  std::string a = pool->TakeSized(65536);
  EXPECT_EQ(a.size(), 65536u);
  a.assign(65536, 'x');
  const char* mem = a.data();
  pool->Give(std::move(a));
  std::string b = pool->TakeSized(60000);  // a read overwrites it all: no zero fill
  EXPECT_EQ(b.data(), mem);
  EXPECT_EQ(b.size(), 60000u);
  EXPECT_EQ(b[59999], 'x');
  pool->Give(std::move(b));
  std::string c = pool->Take(60000);  // Take still hands out an empty buffer
  EXPECT_EQ(c.data(), mem);
  EXPECT_TRUE(c.empty());
}

// A received body goes into the pool of the innermost ReceiveInto of its thread, and only
// of its thread; without one it is a new buffer.
TEST(ReceiveInto, BodiesGoIntoTheScopedPoolOfThisThreadOnly) {
  auto pool = BufferPool::Create(16 << 20);
  std::string given = pool->Take(4 << 20);
  const char* mem = given.data();
  pool->Give(std::move(given));
  {
    std::string outside = ReceiveInto::Buffer(4 << 20);
    EXPECT_NE(outside.data(), mem);
    EXPECT_GE(outside.capacity(), 4u << 20);
    EXPECT_TRUE(outside.empty());
  }
  {
    ReceiveInto scope(pool.get());
    std::thread([&] { EXPECT_NE(ReceiveInto::Buffer(4 << 20).data(), mem); }).join();
    {
      ReceiveInto off(nullptr);
      EXPECT_NE(ReceiveInto::Buffer(4 << 20).data(), mem);
    }
    std::string body = ReceiveInto::Buffer(4 << 20);
    EXPECT_EQ(body.data(), mem);
    EXPECT_TRUE(body.empty());
    auto block = pool->Share(std::move(body));
  }
  EXPECT_EQ(pool->idle_bytes(), 4u << 20) << "the shared block came back to the pool";
  EXPECT_NE(ReceiveInto::Buffer(4 << 20).data(), mem) << "the scope ended";
}

}  // namespace tierfs
