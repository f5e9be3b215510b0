// Tests only: an Azure account SAS token made the way Azure's documentation specifies
// ("Create an account SAS", version 2020-12-06 and later), so that tests can reach Azurite
// through a SAS without an Azure SDK. azure_store_test.cc checks it against a token made by
// an independent implementation.
#pragma once

#include <string>

#include "common/base64.h"
#include "object/s3_sign.h"

namespace tierfs {

// The token's query string (sv=...&sig=...), for the blob service, resource types
// service, container and object, valid from 2020 to 2099 over http and https.
inline std::string AccountSasForTests(const std::string& account, const std::string& key_base64,
                                      const std::string& permissions) {
  const std::string sv = "2021-08-06", ss = "b", srt = "sco", st = "2020-01-01T00:00:00Z",
                    se = "2099-01-01T00:00:00Z", spr = "https,http";
  // account, permissions, services, resource types, start, expiry, IP, protocol, version,
  // encryption scope, each followed by a newline.
  std::string to_sign = account + "\n" + permissions + "\n" + ss + "\n" + srt + "\n" + st + "\n" + se + "\n\n" + spr +
                        "\n" + sv + "\n\n";
  std::string sig = Base64Encode(HmacSha256(Base64Decode(key_base64).value_or(""), to_sign));
  return "sv=" + sv + "&ss=" + ss + "&srt=" + srt + "&sp=" + permissions + "&st=" + UriEncode(st, false) +
         "&se=" + UriEncode(se, false) + "&spr=" + UriEncode(spr, false) + "&sig=" + UriEncode(sig, false);
}

}  // namespace tierfs
