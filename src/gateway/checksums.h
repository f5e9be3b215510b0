// The object checksums of the S3 API (x-amz-checksum-*: CRC32, CRC32C, CRC64NVME, SHA1,
// SHA256; base64 of the big-endian digest) and the MD5 of ETags and Content-MD5, computed
// while a body streams through.
//
// Threads: a Checksummer is used by one thread at a time; the free functions by any.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tierfs::gateway {

enum class ChecksumAlgo { kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256, kMd5 };

// "CRC32", "crc32c", "CRC64NVME", "SHA1", "SHA256" (any case; MD5 is not an S3 checksum
// algorithm and is not accepted here).
std::optional<ChecksumAlgo> ParseChecksumAlgo(std::string_view name);
// "CRC32" ... as S3 spells them in x-amz-checksum-algorithm and XML.
const char* AlgoName(ChecksumAlgo a);
// "x-amz-checksum-crc32" ...
std::string ChecksumHeader(ChecksumAlgo a);

class Checksummer {
 public:
  explicit Checksummer(ChecksumAlgo algo);
  ~Checksummer();
  Checksummer(const Checksummer&) = delete;
  Checksummer& operator=(const Checksummer&) = delete;
  ChecksumAlgo algo() const { return algo_; }
  void Update(std::string_view data);
  // The raw digest (4, 8, 16, 20 or 32 bytes); the checksummer is spent afterwards.
  std::string Digest();

 private:
  ChecksumAlgo algo_;
  uint64_t crc_ = 0;
  struct Md;  // OpenSSL's digest context for the hashes
  std::unique_ptr<Md> md_;
};

std::string Base64Encode(std::string_view raw);
// nullopt when s is not valid base64.
std::optional<std::string> Base64Decode(std::string_view s);
std::string HexOf(std::string_view raw);  // lowercase

// CRC-32C and CRC-64/NVME of a buffer, continuing from crc (0 to start); exposed for tests.
uint32_t Crc32c(uint32_t crc, std::string_view data);
uint64_t Crc64Nvme(uint64_t crc, std::string_view data);

}  // namespace tierfs::gateway
