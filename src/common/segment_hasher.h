// SegmentHasher: the checksums (Checksum32) of a body's fixed-size segments, computed while
// the body is being received, when its bytes are still in the CPU's cache, instead of in a
// second pass over memory after it arrived (measured on cold 4 MiB S3 GETs: the second pass
// read the block back from DRAM, ~11% of the client's CPU).
//
// A caller that will verify what it receives opens a SegmentHasher on its thread before the
// request; the receiver (HttpClient's write callback) calls Received after each append to
// the body; the caller then asks Sums(body) for the checksum of each segment of the body it
// got. Sums hashes whatever was not hashed during receipt (the last, short segment; all of
// it when `body` is not the buffer that was received: copied, cut, moved to another
// buffer, or of another request), so its answer is always the checksums of `body`'s
// bytes, given that nothing wrote into the received buffer after it arrived (nothing in
// the read path does).
//
// Scopes nest (the innermost is the one fed); a scope belongs to the thread that opened it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tierfs {

class SegmentHasher {
 public:
  explicit SegmentHasher(uint32_t segment);
  ~SegmentHasher();
  SegmentHasher(const SegmentHasher&) = delete;
  SegmentHasher& operator=(const SegmentHasher&) = delete;

  // body: the whole body received so far, of which the last `appended` bytes are new
  // (appended == body.size(): the first bytes of a new body). No-op without a scope.
  static void Received(const std::string& body, size_t appended);

  // The checksum of each segment of body (the last one may be short).
  std::vector<uint32_t> Sums(std::string_view body) const;

 private:
  uint32_t segment_;
  const char* data_ = nullptr;  // the buffer being received
  size_t hashed_ = 0;           // its bytes hashed so far: whole segments
  std::vector<uint32_t> sums_;
  SegmentHasher* prev_;
};

}  // namespace tierfs
