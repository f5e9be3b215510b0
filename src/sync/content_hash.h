// The MD5 of a key's content, for --checksum, --check-new, --check-all and --delete-src:
// the one a side keeps (an S3 ETag of a single PUT) when it has one, else computed by
// reading the key.
#pragma once

#include <string>

#include "sync/side.h"

namespace tierfs::sync {

Result<std::string> ContentMd5(Side* side, const Entry& e);

}  // namespace tierfs::sync
