// Fixed-width integer encoding for keys and values.
//
// Keys use big-endian so that byte order equals numeric order under ordered scans; values
// use the same helpers for simplicity. A Reader never reads past its input: a short or
// corrupt value makes ok() false instead of crashing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tierfs {

inline void PutU8(std::string* s, uint8_t v) { s->push_back(static_cast<char>(v)); }
inline void PutU16(std::string* s, uint16_t v) {
  for (int i = 1; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
// Length-prefixed (u32) string.
inline void PutStr(std::string* s, std::string_view v) {
  PutU32(s, static_cast<uint32_t>(v.size()));
  s->append(v);
}

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  uint8_t U8() { return static_cast<uint8_t>(Take(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Take(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Take(4)); }
  uint64_t U64() { return Take(8); }
  std::string_view Str() {
    uint32_t n = U32();
    if (!ok_ || in_.size() < n) { ok_ = false; return {}; }
    std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }
  std::string_view Rest() { std::string_view r = in_; in_ = {}; return r; }
  bool ok() const { return ok_; }
  bool empty() const { return in_.empty(); }

 private:
  uint64_t Take(size_t n) {
    if (!ok_ || in_.size() < n) { ok_ = false; return 0; }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(in_[i]);
    in_.remove_prefix(n);
    return v;
  }
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace tierfs
