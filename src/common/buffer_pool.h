// A pool of reusable byte buffers, so that block-sized memory is touched once and then
// recycled instead of being freshly allocated (and page-faulted) for every block.
//
// Buffers are grouped in power-of-two size classes from 4 KiB up. Share() wraps a filled
// buffer in a reference-counted block that returns to the pool when its last holder (a
// writer, an upload, the block cache) lets go; the pool outlives every such block.
// Any thread may call any method.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tierfs {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Idle buffers beyond max_idle_bytes are freed instead of kept.
  static std::shared_ptr<BufferPool> Create(size_t max_idle_bytes);

  // An empty string with at least `capacity` bytes reserved.
  std::string Take(size_t capacity);
  // A string of `size` bytes whose contents are unspecified, for a caller that overwrites
  // them all (a read): a recycled buffer is not zero-filled first (only a part beyond
  // what it held before), and its pages are already mapped.
  std::string TakeSized(size_t size);
  // Returns a buffer for reuse (its contents are discarded).
  void Give(std::string&& buf);
  // Makes a shared, immutable block of buf that comes back to the pool when released.
  std::shared_ptr<const std::string> Share(std::string&& buf);

  size_t idle_bytes() const;

 private:
  explicit BufferPool(size_t max_idle_bytes) : max_idle_(max_idle_bytes) {}
  static int ClassOf(size_t capacity);  // smallest class holding capacity
  bool PopIdle(size_t capacity, std::string* out);  // an idle buffer of capacity's class

  static constexpr int kClasses = 16;  // 4 KiB .. 128 MiB
  size_t max_idle_;
  mutable std::mutex mu_;
  size_t idle_ = 0;
  std::vector<std::string> free_[kClasses];
};

// Receiving into a pool: while a ReceiveInto lives on a thread, a body of known length that
// this thread receives (HttpClient, from Content-Length) goes into a buffer of `pool`, and
// the caller that scoped it hands the result back with pool->Share. A cold read of a 4 MiB
// block then writes into memory that is already mapped instead of page-faulting 1024 fresh
// pages (measured: page faults were a third of the client's CPU on cold S3 reads). Scopes
// nest; nullptr turns pooling off inside one.
class ReceiveInto {
 public:
  explicit ReceiveInto(BufferPool* pool);
  ~ReceiveInto();
  ReceiveInto(const ReceiveInto&) = delete;
  ReceiveInto& operator=(const ReceiveInto&) = delete;

  // An empty string with at least n bytes reserved: from this thread's innermost pool, or
  // newly allocated when there is none.
  static std::string Buffer(size_t n);

 private:
  BufferPool* prev_;
};

}  // namespace tierfs
