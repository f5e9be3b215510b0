#include "common/backoff.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

namespace tierfs {

std::mt19937_64& ThreadRng() {
  thread_local std::mt19937_64 rng;
  thread_local pid_t seeded = 0;
  pid_t pid = getpid();
  if (seeded != pid) {
    std::random_device rd;
    rng.seed((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(pid) ^
             std::hash<std::thread::id>()(std::this_thread::get_id()));
    seeded = pid;
  }
  return rng;
}

std::chrono::microseconds JitteredBackoff(int attempt, std::chrono::microseconds base,
                                          std::chrono::microseconds cap) {
  int shift = std::clamp(attempt, 0, 20);
  auto full = std::min<std::chrono::microseconds>(cap, base * (1LL << shift));
  std::uniform_int_distribution<int64_t> dist(full.count() / 2, full.count());
  return std::chrono::microseconds(dist(ThreadRng()));
}

}  // namespace tierfs
