// Object keys and bucket names as TierFS stores them: a key is a path below its bucket's
// directory ("a/b/c" is file c in directory a/b; "a/b/" is directory a/b itself), so a key
// must be a path a kernel file system can hold. Refused, with S3's error codes:
// KeyTooLongError over 1024 bytes; InvalidArgument for empty components ("a//b"), "." and
// "..", NUL, components over 255 bytes, and a first component ".tierfs-gateway" (the
// gateway's own directory in the volume's root: staging area and uploads; never listed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gateway/s3_error.h"

namespace tierfs::gateway {

// The gateway's own directory in the volume's root, and the prefix of the names it stages
// files under there.
inline constexpr char kGatewayDir[] = ".tierfs-gateway";
inline constexpr char kHiddenPrefix[] = ".tierfs-";

struct KeyPath {
  std::vector<std::string> dirs;  // directories from the bucket down
  std::string leaf;               // the file's name; "" for a directory key ("a/b/")
  bool is_dir() const { return leaf.empty(); }
};

S3Result<KeyPath> ParseKey(std::string_view key);

// S3's rules: 3-63 characters of lowercase letters, digits, '.' and '-', starting and ending
// with a letter or digit, not an IP address.
bool ValidBucketName(std::string_view name);

}  // namespace tierfs::gateway
