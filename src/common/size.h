// Human sizes: "4M", "64K", "1G", "300" (bytes), "1.5G", "2P".
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tierfs {

// The largest size (and count) accepted: 2^63 - 1, what every counter of the volume holds.
constexpr uint64_t kMaxSize = (uint64_t{1} << 63) - 1;

// A decimal number, optionally with a fraction, and an optional binary suffix K, M, G, T, P
// or E (powers of 1024; lower case, "Ki" and "KB" forms accepted). EINVAL naming the text
// for anything else: negative numbers, other suffixes, and sizes above kMaxSize (8 EiB), so
// that no size ever wraps around. Callers add the option's name (Status::With).
Result<uint64_t> ParseSize(const std::string& text);
// A count (inodes, files): decimal digits only, at most kMaxSize; EINVAL otherwise.
Result<uint64_t> ParseCount(const std::string& text);
std::string FormatSize(uint64_t bytes);

}  // namespace tierfs
