// Non-cryptographic hashing (xxHash) for checksums and fan-out.
#pragma once

#include <cstdint>
#include <string_view>

namespace tierfs {

uint64_t Hash64(std::string_view data);
uint32_t Checksum32(std::string_view data);

}  // namespace tierfs
