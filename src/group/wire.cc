#include "group/wire.h"

#include <openssl/crypto.h>

#include <cerrno>

#include "common/encoding.h"
#include "common/hash.h"
#include "object/checksum_store.h"
#include "object/s3_sign.h"

namespace tierfs::group {

std::string RequestMac(std::string_view secret, std::string_view volume, std::string_view key, uint32_t len,
                       int64_t time_s) {
  std::string msg = "req\n";
  msg.append(volume).append("\n").append(key).append("\n").append(std::to_string(len)).append("\n");
  msg.append(std::to_string(time_s));
  return HexEncode(HmacSha256(secret, msg));
}

std::string ReplyMac(std::string_view secret, std::string_view key, uint32_t len, std::string_view table) {
  std::string msg = "rep\n";
  msg.append(key).append("\n").append(std::to_string(len)).append("\n").append(table);
  return HexEncode(HmacSha256(secret, msg));
}

size_t TableSize(uint32_t len) { return 4 * ((static_cast<size_t>(len) + kChecksumSegment - 1) / kChecksumSegment); }

std::string ChecksumTable(std::string_view data) {
  std::string table;
  table.reserve(TableSize(static_cast<uint32_t>(data.size())));
  for (size_t off = 0; off < data.size(); off += kChecksumSegment) {
    PutU32(&table, Checksum32(data.substr(off, kChecksumSegment)));
  }
  return table;
}

bool SameMac(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Status VerifyReply(std::string_view secret, std::string_view key, uint32_t len, std::string_view mac_hex,
                   std::string_view body, std::string_view* data) {
  size_t table_size = TableSize(len);
  if (body.size() != table_size + len) {
    return Status::Err(EIO, "peer reply for " + std::string(key) + " has " + std::to_string(body.size()) +
                                " bytes, expected " + std::to_string(table_size + len));
  }
  std::string_view table = body.substr(0, table_size);
  if (!SameMac(ReplyMac(secret, key, len, table), mac_hex)) {
    return Status::Err(EIO, "peer reply for " + std::string(key) + " has a bad MAC");
  }
  std::string_view bytes = body.substr(table_size);
  ByteReader r(table);
  for (size_t off = 0, seg = 0; off < bytes.size(); off += kChecksumSegment, ++seg) {
    if (Checksum32(bytes.substr(off, kChecksumSegment)) != r.U32()) {
      return Status::Err(EIO, "peer reply for " + std::string(key) + " fails the checksum of segment " +
                                  std::to_string(seg));
    }
  }
  *data = bytes;
  return Status::OK();
}

}  // namespace tierfs::group
