#include "common/hash.h"

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

}  // namespace tierfs
