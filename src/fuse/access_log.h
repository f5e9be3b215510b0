// MOUNTPOINT/.accesslog: a virtual, read-only file (root only) that streams one line per
// request to whoever has it open: time, uid, gid, pid, operation with path and arguments,
// result, latency. With no reader nothing is formatted (one relaxed atomic load per
// request). Each reader has its own queue; a reader too slow to keep up loses the oldest
// lines (a line says how many).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tierfs::fuse_internal {

// The kernel-side inode of .accesslog (above every inode the volume hands out, next to the
// trash's).
constexpr uint64_t kAccessLogIno = 0x7fffffff00000001ull;
inline constexpr const char* kAccessLogName = ".accesslog";

class AccessLog {
 public:
  static bool Active();
  // A new reader; its id is the file handle.
  static uint64_t Open();
  static void Close(uint64_t id);
  static void Add(const std::string& line);
  // Up to max bytes of whole lines; waits up to `wait` for the first one ("" when none came).
  static std::string Read(uint64_t id, size_t max, std::chrono::milliseconds wait);
};

}  // namespace tierfs::fuse_internal
