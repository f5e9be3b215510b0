#include "common/hash.h"

#include <cstdio>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

// libxxhash's x86 builds carry a dispatcher that picks the widest vector unit of the CPU
// (AVX-512, AVX2, SSE2) at the first call; the plain entry points are compiled for the
// baseline (SSE2). The results are the same bit for bit (hash_test.cc pins them); the
// speed is not: 12 against 22 GiB/s for 64 KiB segments on this project's test machine
// (bench/hash_speed.c), and a cold read hashes every byte of every block.
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#define TIERFS_XXH3_64 XXH3_64bits_dispatch
#define TIERFS_XXH3_64_UPDATE XXH3_64bits_update_dispatch
#define TIERFS_XXH3_128 XXH3_128bits_dispatch
#else
#define TIERFS_XXH3_64 XXH3_64bits
#define TIERFS_XXH3_64_UPDATE XXH3_64bits_update
#define TIERFS_XXH3_128 XXH3_128bits
#endif

namespace tierfs {

uint64_t Hash64(std::string_view data) { return TIERFS_XXH3_64(data.data(), data.size()); }
uint32_t Checksum32(std::string_view data) {
  return static_cast<uint32_t>(TIERFS_XXH3_64(data.data(), data.size()));
}
uint32_t Checksum32(std::initializer_list<std::string_view> parts) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (std::string_view p : parts) TIERFS_XXH3_64_UPDATE(&st, p.data(), p.size());
  return static_cast<uint32_t>(XXH3_64bits_digest(&st));
}

std::string Hash128Hex(std::string_view data) {
  XXH128_hash_t h = TIERFS_XXH3_128(data.data(), data.size());
  char buf[33];
  snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
           static_cast<unsigned long long>(h.low64));
  return std::string(buf, 32);
}

}  // namespace tierfs
