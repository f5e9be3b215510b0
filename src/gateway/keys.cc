#include "gateway/keys.h"

#include <cctype>

namespace tierfs::gateway {

S3Result<KeyPath> ParseKey(std::string_view key) {
  if (key.empty()) return Err(400, "InvalidArgument", "an object key may not be empty");
  if (key.size() > 1024) return Err(400, "KeyTooLongError", "Your key is too long");
  KeyPath out;
  size_t start = 0;
  while (start < key.size()) {
    size_t slash = key.find('/', start);
    std::string_view part = key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    const bool last = slash == std::string_view::npos;
    auto bad = [&](const std::string& why) {
      return Err(400, "InvalidArgument",
                 "key '" + std::string(key) + "': " + why + " (TierFS stores keys as file paths)");
    };
    if (part.empty()) return bad("empty path components ('//' or a leading '/') are not allowed");
    if (part == "." || part == "..") return bad("'.' and '..' are not allowed as path components");
    if (part.find('\0') != std::string_view::npos) return bad("NUL is not allowed");
    if (part.size() > 255) return bad("a path component is longer than 255 bytes");
    if (out.dirs.empty() && part == kGatewayDir) return bad("the top-level name '.tierfs-gateway' is reserved");
    if (last) {
      out.leaf = std::string(part);
    } else {
      out.dirs.emplace_back(part);
    }
    if (last) break;
    start = slash + 1;
  }
  return out;
}

bool ValidBucketName(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-')) {
      return false;
    }
  }
  auto alnum = [](char c) { return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  if (name.find("..") != std::string_view::npos) return false;
  int dots = 0;
  bool digits = true;
  for (char c : name) {
    if (c == '.') dots++;
    else if (!std::isdigit(static_cast<unsigned char>(c))) digits = false;
  }
  return !(dots == 3 && digits);
}

}  // namespace tierfs::gateway
