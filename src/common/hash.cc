#include "common/hash.h"

#include <cstdio>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace tierfs {

uint64_t Hash64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }
uint32_t Checksum32(std::string_view data) {
  return static_cast<uint32_t>(XXH3_64bits(data.data(), data.size()));
}
uint32_t Checksum32(std::initializer_list<std::string_view> parts) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (std::string_view p : parts) XXH3_64bits_update(&st, p.data(), p.size());
  return static_cast<uint32_t>(XXH3_64bits_digest(&st));
}

std::string Hash128Hex(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  char buf[33];
  snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
           static_cast<unsigned long long>(h.low64));
  return std::string(buf, 32);
}

}  // namespace tierfs
