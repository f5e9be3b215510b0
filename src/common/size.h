// Human sizes: "4M", "64K", "1G", "300" (bytes), "1.5G".
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tierfs {

Result<uint64_t> ParseSize(const std::string& text);
std::string FormatSize(uint64_t bytes);

}  // namespace tierfs
