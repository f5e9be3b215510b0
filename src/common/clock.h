// Wall-clock helpers. Timestamps in metadata are nanoseconds since the Unix epoch.
#pragma once

#include <cstdint>
#include <ctime>

namespace tierfs {

inline int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
inline int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Monotonic, and counting the time the host was suspended (session leases: a client that
// slept through its session timeout must know it).
inline int64_t BootNanos() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace tierfs
