#include "common/hash.h"

#include <xxhash.h>

namespace tierfs {

uint64_t Hash64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }
uint32_t Checksum32(std::string_view data) {
  return static_cast<uint32_t>(XXH3_64bits(data.data(), data.size()));
}

}  // namespace tierfs
