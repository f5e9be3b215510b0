#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

namespace tierfs {

TEST(ThreadPool, RunsEveryTask) {
  std::atomic<int> n{0};
  {
    ThreadPool pool("test", 3, 4);
    for (int i = 0; i < 1000; ++i) pool.Submit([&] { n++; });
  }
  EXPECT_EQ(n.load(), 1000);
}

TEST(ThreadPool, TrySubmitRefusesWhenFull) {
  std::mutex gate;
  gate.lock();
  ThreadPool pool("test", 1, 1);
  pool.Submit([&] { std::lock_guard<std::mutex> l(gate); });  // occupies the worker
  // Fill the queue: the worker may not have dequeued yet, so allow one retry.
  int accepted = 0;
  for (int i = 0; i < 3; ++i) accepted += pool.TrySubmit([] {}) ? 1 : 0;
  EXPECT_LE(accepted, 2);
  gate.unlock();
}

}  // namespace tierfs
