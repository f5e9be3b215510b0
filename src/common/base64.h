// Standard base64 (RFC 4648, with padding), for binary values inside JSON documents.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tierfs {

std::string Base64Encode(std::string_view in);
// nullopt when in is not valid padded base64.
std::optional<std::string> Base64Decode(std::string_view in);

}  // namespace tierfs
