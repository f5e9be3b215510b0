// The window of a run's decisions: the watermark moves only over a prefix settled in full,
// and reaches its consumer in the order it moved, however the settling threads interleave.
#include "sync/window.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace tierfs::sync {
namespace {

Counts Copied(uint64_t n) {
  Counts c;
  c.found = n;
  c.copied = n;
  return c;
}

TEST(Window, TheWatermarkMovesOverSettledPrefixesOnly) {
  Window w(10);
  Counts base;
  base.skipped = 5;
  w.SetBase(base);
  uint64_t a = w.Open("a"), b = w.Open("b"), c = w.Open("c");
  std::vector<std::string> seen;
  auto note = [&](const std::string& key, const Counts&) { seen.push_back(key); };
  w.Close(b, Copied(1), note);  // "a" still open: no move
  EXPECT_TRUE(seen.empty());
  w.Close(a, Copied(1), note);  // "a" and "b" at once
  EXPECT_EQ(seen, std::vector<std::string>{"b"});
  w.Close(c, Copied(1), note);
  EXPECT_EQ(seen, (std::vector<std::string>{"b", "c"}));
  Counts t = w.Total();
  EXPECT_EQ(t.copied, 3u);
  EXPECT_EQ(t.skipped, 5u);
}

// A consumer slow to take one watermark does not see a later one first. (When the
// watermark was handed out after the lock, the later one could be applied first and then
// overwritten by the earlier: a run's summary lost the later item's count.)
TEST(Window, WatermarksReachTheConsumerInOrder) {
  Window w(10);
  uint64_t a = w.Open("a"), b = w.Open("b");
  std::vector<std::pair<std::string, uint64_t>> applied;
  std::mutex mu;
  std::promise<void> entered;
  auto apply = [&](const std::string& key, const Counts& total) {
    if (key == "a") {
      entered.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::lock_guard<std::mutex> l(mu);
    applied.emplace_back(key, total.copied);
  };
  std::thread first([&] { w.Close(a, Copied(1), apply); });
  entered.get_future().wait();  // the first consumer is inside, slow
  std::thread second([&] { w.Close(b, Copied(1), apply); });
  first.join();
  second.join();
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0], std::make_pair(std::string("a"), uint64_t{1}));
  EXPECT_EQ(applied[1], std::make_pair(std::string("b"), uint64_t{2}));  // the last applied holds every count
}

}  // namespace
}  // namespace tierfs::sync
