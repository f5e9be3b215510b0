#include "gateway/checksums.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <array>
#include <cctype>

namespace tierfs::gateway {
namespace {

// Table-driven reflected CRCs, 8 tables (slicing by 8): a few GB/s on one core.
template <typename T, T kPoly>
struct CrcTables {
  std::array<std::array<T, 256>, 8> t{};
  CrcTables() {
    for (unsigned i = 0; i < 256; ++i) {
      T c = static_cast<T>(i);
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (unsigned i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};

template <typename T, T kPoly>
T Update(const CrcTables<T, kPoly>& tb, T crc, std::string_view data) {
  crc = ~crc;
  auto p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  while (n >= 8) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    if constexpr (sizeof(T) == 8) {
      v ^= crc;
    } else {
      v ^= static_cast<uint64_t>(crc);
    }
    crc = tb.t[7][v & 0xff] ^ tb.t[6][(v >> 8) & 0xff] ^ tb.t[5][(v >> 16) & 0xff] ^ tb.t[4][(v >> 24) & 0xff] ^
          tb.t[3][(v >> 32) & 0xff] ^ tb.t[2][(v >> 40) & 0xff] ^ tb.t[1][(v >> 48) & 0xff] ^ tb.t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ tb.t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

const CrcTables<uint32_t, 0x82F63B78u>& Crc32cTables() {
  static const CrcTables<uint32_t, 0x82F63B78u> t;
  return t;
}
const CrcTables<uint64_t, 0x9A6C9329AC4BC9B5ull>& Crc64Tables() {
  static const CrcTables<uint64_t, 0x9A6C9329AC4BC9B5ull> t;
  return t;
}

std::string BigEndian(uint64_t v, int bytes) {
  std::string out(static_cast<size_t>(bytes), '\0');
  for (int i = bytes - 1; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

}  // namespace

struct Checksummer::Md {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Md() { EVP_MD_CTX_free(ctx); }
};

std::optional<ChecksumAlgo> ParseChecksumAlgo(std::string_view name) {
  std::string up;
  for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (up == "CRC32") return ChecksumAlgo::kCrc32;
  if (up == "CRC32C") return ChecksumAlgo::kCrc32c;
  if (up == "CRC64NVME") return ChecksumAlgo::kCrc64Nvme;
  if (up == "SHA1") return ChecksumAlgo::kSha1;
  if (up == "SHA256") return ChecksumAlgo::kSha256;
  return std::nullopt;
}

const char* AlgoName(ChecksumAlgo a) {
  switch (a) {
    case ChecksumAlgo::kCrc32: return "CRC32";
    case ChecksumAlgo::kCrc32c: return "CRC32C";
    case ChecksumAlgo::kCrc64Nvme: return "CRC64NVME";
    case ChecksumAlgo::kSha1: return "SHA1";
    case ChecksumAlgo::kSha256: return "SHA256";
    case ChecksumAlgo::kMd5: return "MD5";
  }
  return "";
}

std::string ChecksumHeader(ChecksumAlgo a) {
  std::string out = "x-amz-checksum-";
  for (const char* c = AlgoName(a); *c; ++c) out.push_back(static_cast<char>(std::tolower(*c)));
  return out;
}

Checksummer::Checksummer(ChecksumAlgo algo) : algo_(algo) {
  const EVP_MD* md = nullptr;
  if (algo == ChecksumAlgo::kSha1) md = EVP_sha1();
  if (algo == ChecksumAlgo::kSha256) md = EVP_sha256();
  if (algo == ChecksumAlgo::kMd5) md = EVP_md5();
  if (md) {
    md_ = std::make_unique<Md>();
    EVP_DigestInit_ex(md_->ctx, md, nullptr);
  }
}

Checksummer::~Checksummer() = default;

void Checksummer::Update(std::string_view data) {
  switch (algo_) {
    case ChecksumAlgo::kCrc32:
      crc_ = crc32_z(static_cast<uLong>(crc_), reinterpret_cast<const Bytef*>(data.data()), data.size());
      break;
    case ChecksumAlgo::kCrc32c: crc_ = Crc32c(static_cast<uint32_t>(crc_), data); break;
    case ChecksumAlgo::kCrc64Nvme: crc_ = Crc64Nvme(crc_, data); break;
    default: EVP_DigestUpdate(md_->ctx, data.data(), data.size()); break;
  }
}

std::string Checksummer::Digest() {
  switch (algo_) {
    case ChecksumAlgo::kCrc32:
    case ChecksumAlgo::kCrc32c: return BigEndian(crc_, 4);
    case ChecksumAlgo::kCrc64Nvme: return BigEndian(crc_, 8);
    default: {
      unsigned char md[EVP_MAX_MD_SIZE];
      unsigned int len = 0;
      EVP_DigestFinal_ex(md_->ctx, md, &len);
      return std::string(reinterpret_cast<const char*>(md), len);
    }
  }
}

uint32_t Crc32c(uint32_t crc, std::string_view data) { return Update(Crc32cTables(), crc, data); }
uint64_t Crc64Nvme(uint64_t crc, std::string_view data) { return Update(Crc64Tables(), crc, data); }

std::string Base64Encode(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> Base64Decode(std::string_view s) {
  if (s.size() % 4 != 0) return std::nullopt;
  std::string out(3 * s.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          static_cast<int>(s.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  if (!s.empty() && s.back() == '=') pad++;
  if (s.size() > 1 && s[s.size() - 2] == '=') pad++;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string HexOf(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (char ch : raw) {
    auto c = static_cast<unsigned char>(ch);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace tierfs::gateway
