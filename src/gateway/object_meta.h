// What S3 knows of an object and a file does not: its ETag, content type, user metadata
// (x-amz-meta-*), checksums and, for a directory, who made it. Kept in one extended
// attribute of the file, trusted.tierfs.s3 (JSON; the trusted namespace is root's, so mount
// users neither see nor forge it), written in the transaction that publishes the object,
// and carried by renames and clones through a mount like any xattr.
//
// An ETag is valid for the content it was computed from: it records the file's change
// sequence (Attr::seq, moved by every write, truncation or punch), and a file changed since
// (through a mount) gets a new ETag computed on its next request.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tierfs::gateway {

inline constexpr char kObjectXattr[] = "trusted.tierfs.s3";
// The ETag of no bytes: a directory's ("a/b/").
inline constexpr char kEmptyEtag[] = "d41d8cd98f00b204e9800998ecf8427e";

struct ObjectMeta {
  std::string etag;  // without quotes: hex MD5, or hex MD5-of-MD5s "-N" for multipart
  uint64_t seq = 0;  // Attr::seq of the content the ETag describes
  std::string content_type;
  std::map<std::string, std::string> user;       // x-amz-meta-NAME (lowercase NAME) -> value
  std::map<std::string, std::string> checksums;  // "CRC32" ... -> base64 value
  std::map<std::string, std::string> headers;    // cache-control, content-disposition, ... as given
  uint32_t parts = 0;  // multipart: how many parts
  // Directories: "implicit" (made by the gateway as the parent of a key; removed with its
  // last object), "explicit" (a "dir/" object was put); absent: made through a mount.
  std::string dir;

  std::string ToJson() const;
  // nullopt when `json` is not such an object. What ToJson writes is read by a small reader
  // of its own; anything else by FromJsonDom (nlohmann), with the same result. `listed`:
  // only what a listing prints is sure to be kept (etag, seq, parts, dir); the rest may be
  // left empty.
  static std::optional<ObjectMeta> FromJson(const std::string& json, bool listed = false);
  static std::optional<ObjectMeta> FromJsonDom(const std::string& json);
};

}  // namespace tierfs::gateway
