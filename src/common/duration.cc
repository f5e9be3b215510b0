#include "common/duration.h"

#include <cstdint>
#include <cstdlib>

namespace tierfs {

bool ParseDuration(const std::string& text, std::chrono::milliseconds* out) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  std::string unit(end);
  double ms;
  if (unit.empty() || unit == "s") {
    ms = v * 1000;
  } else if (unit == "ms") {
    ms = v;
  } else if (unit == "m") {
    ms = v * 60000;
  } else if (unit == "h") {
    ms = v * 3600000;
  } else {
    return false;
  }
  if (ms < 1 || ms > 86400000.0 * 365) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(ms));
  return true;
}

}  // namespace tierfs
