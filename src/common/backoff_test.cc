#include "common/backoff.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tierfs {
namespace {

using std::chrono::microseconds;

TEST(Backoff, DoublesWithJitterUpToTheCap) {
  for (int attempt = 0; attempt < 40; ++attempt) {
    int64_t full = std::min<int64_t>(50'000, 200LL << std::min(attempt, 20));
    for (int i = 0; i < 50; ++i) {
      auto d = JitteredBackoff(attempt, microseconds(200), microseconds(50'000)).count();
      EXPECT_GE(d, full / 2) << "attempt " << attempt;
      EXPECT_LE(d, full) << "attempt " << attempt;
    }
  }
  EXPECT_LE(JitteredBackoff(-3, microseconds(200), microseconds(50'000)).count(), 200);
  EXPECT_LE(JitteredBackoff(1 << 30, microseconds(10'000), microseconds(1'000'000)).count(), 1'000'000);
}

TEST(Backoff, ChildAfterForkDrawsADifferentSequence) {
  ThreadRng()();  // seeded in the parent
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t v = ThreadRng()();
    ssize_t n = write(fds[1], &v, sizeof v);
    _exit(n == sizeof v ? 0 : 1);
  }
  uint64_t parent = ThreadRng()(), child = 0;
  ASSERT_EQ(read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(parent, child);
}

}  // namespace
}  // namespace tierfs
