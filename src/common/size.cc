#include "common/size.h"

#include <cerrno>
#include <cstdio>

namespace tierfs {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<uint64_t> ParseSize(const std::string& text) {
  const std::string expected = "expected a number with an optional K, M, G, T, P or E suffix (powers of 1024)";
  auto bad = [&](const std::string& why) { return Status::Err(EINVAL, "bad size '" + text + "': " + why); };
  if (text.empty()) return Status::Err(EINVAL, "empty size: " + expected);
  if (text[0] == '-') return bad("a size cannot be negative");
  size_t i = 0;
  bool too_large = false;
  uint64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (whole > (kMaxSize - d) / 10) too_large = true;
    if (!too_large) whole = whole * 10 + d;
  }
  // The fraction, as a binary fraction of 2^62 (exact enough for "1.5G" and "0.25T").
  long double frac = 0, scale = 1;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && IsDigit(text[i]); ++i, ++digits) {
      scale /= 10;
      frac += (text[i] - '0') * scale;
    }
  }
  if (digits == 0) return bad(expected);
  std::string suffix = text.substr(i);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (!suffix.empty() && suffix.back() == 'i') suffix.pop_back();
  int shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (suffix == "T" || suffix == "t") shift = 40;
  else if (suffix == "P" || suffix == "p") shift = 50;
  else if (suffix == "E" || suffix == "e") shift = 60;
  else return bad("unknown suffix '" + text.substr(i) + "': " + expected);
  const std::string limit = "too large: sizes go up to 8E (2^63 bytes) less one";
  if (too_large || whole > (kMaxSize >> shift)) return bad(limit);
  uint64_t v = whole << shift;
  uint64_t extra = static_cast<uint64_t>(frac * static_cast<long double>(uint64_t{1} << shift));
  if (extra > kMaxSize - v) return bad(limit);
  return v + extra;
}

Result<uint64_t> ParseCount(const std::string& text) {
  auto bad = [&](const std::string& why) { return Status::Err(EINVAL, "bad count '" + text + "': " + why); };
  if (text.empty()) return bad("expected a whole number");
  if (text[0] == '-') return bad("a count cannot be negative");
  uint64_t v = 0;
  for (char c : text) {
    if (!IsDigit(c)) return bad("expected a whole number");
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (kMaxSize - d) / 10) return bad("too large (at most 2^63 - 1)");
    v = v * 10 + d;
  }
  return v;
}

std::string FormatSize(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) { v /= 1024; ++u; }
  char buf[32];
  if (u == 0) snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace tierfs
