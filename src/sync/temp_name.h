// The temporary names POSIX sides write a copy under before renaming it into place:
// ".tierfs-sync.NAME.RANDOM" in the key's own directory (so the rename stays within one
// directory and file system). A run killed with SIGKILL leaves them behind; listings
// return them, and the syncer removes the destination's on its next run and never counts
// or copies them.
#pragma once

#include <cstdio>
#include <random>
#include <string>

#include "common/backoff.h"

namespace tierfs::sync {

inline constexpr const char* kTempPrefix = ".tierfs-sync.";

inline bool IsTempName(const std::string& key) {
  if (key.empty() || key.back() == '/') return false;
  size_t slash = key.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  return key.compare(base, 13, kTempPrefix) == 0;
}

inline std::string TempNameFor(const std::string& name) {
  std::mt19937_64& rng = ThreadRng();  // seeded again after fork()
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(rng()));
  // Keep the name within NAME_MAX whatever the original's length.
  return std::string(kTempPrefix) + name.substr(0, 200) + "." + suffix;
}

}  // namespace tierfs::sync
