// The aws-chunked body encoding (Content-Encoding: aws-chunked) that SDKs use to stream
// uploads: "HEXSIZE[;chunk-signature=SIG]\r\nDATA\r\n" ..., a last chunk of size 0, and, in
// the *-TRAILER variants, trailing headers (a checksum, and for the signed variant a
// x-amz-trailer-signature) before a final empty line.
//
// The decoder is fed the body as it arrives and hands the data on chunk by chunk. A signed
// chunk is handed on only after its signature (chained from the request's) verified, so no
// byte of a forged chunk reaches the file; a chunk is held in memory until then, and chunks
// above kMaxChunk are refused. Errors: SignatureDoesNotMatch, IncompleteBody (the body
// ended early), InvalidRequest (malformed framing).
//
// Threads: one decoder per request, one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/checksums.h"
#include "gateway/s3_error.h"
#include "gateway/sigv4_verify.h"

namespace tierfs::gateway {

class ChunkedDecoder {
 public:
  static constexpr size_t kMaxChunk = 16u << 20;
  // sink receives the decoded data; an error it returns ends the decoding.
  using Sink = std::function<std::optional<S3Error>(std::string_view data)>;
  ChunkedDecoder(const Identity& id, Sink sink);

  // Feeds the next bytes of the raw body.
  std::optional<S3Error> Feed(std::string_view bytes);
  // The body ended: an error unless the encoding ended properly.
  std::optional<S3Error> Finish();

  // Trailing headers received (lowercase names), e.g. "x-amz-checksum-crc32".
  const std::map<std::string, std::string>& trailers() const { return trailers_; }
  uint64_t decoded_bytes() const { return decoded_; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  std::optional<S3Error> OnLine(const std::string& line);
  std::optional<S3Error> EndChunk();
  std::string ChunkSignature(std::string_view data_sha256_hex) const;

  Identity id_;
  Sink sink_;
  bool signed_ = false, trailer_ = false;
  State state_ = State::kSize;
  std::string line_;       // a line being read (size line or trailer)
  std::string chunk_;      // the data of the current chunk
  size_t want_ = 0;        // its size
  std::string chunk_sig_;  // its signature
  std::string prev_sig_;
  bool last_ = false;  // the zero-size chunk was read
  std::map<std::string, std::string> trailers_;
  std::string trailer_sig_;
  std::string trailer_canonical_;
  uint64_t decoded_ = 0;
};

}  // namespace tierfs::gateway
