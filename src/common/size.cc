#include "common/size.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tierfs {

Result<uint64_t> ParseSize(const std::string& text) {
  if (text.empty()) return Status::Err(EINVAL, "empty size");
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0 || std::isnan(v)) {
    return Status::Err(EINVAL, "bad size '" + text + "': expected a number with optional K, M, G or T suffix");
  }
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && (suffix.back() == 'i')) suffix.pop_back();
  double mult = 1;
  if (suffix.empty()) mult = 1;
  else if (suffix == "K" || suffix == "k") mult = 1024.0;
  else if (suffix == "M" || suffix == "m") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  else return Status::Err(EINVAL, "bad size '" + text + "': unknown suffix '" + suffix + "'");
  return static_cast<uint64_t>(v * mult);
}

std::string FormatSize(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) { v /= 1024; ++u; }
  char buf[32];
  if (u == 0) snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace tierfs
