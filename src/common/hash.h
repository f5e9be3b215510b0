// Non-cryptographic hashing (xxHash) for checksums and fan-out.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tierfs {

uint64_t Hash64(std::string_view data);
uint32_t Checksum32(std::string_view data);
// Checksum32 of the concatenation of the parts, without concatenating them.
uint32_t Checksum32(std::initializer_list<std::string_view> parts);
// XXH3-128 of data as 32 lowercase hex digits: a name for content that must not collide.
std::string Hash128Hex(std::string_view data);

}  // namespace tierfs
