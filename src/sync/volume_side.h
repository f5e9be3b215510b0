// A directory inside a TierFS volume as a sync side, read and written through the client
// library (client::Volume: the engine, the store, the caches and the write path a mount
// uses) with no mount. Everything is done as root (uid 0), as rsync run by root would.
//
// Listing reads each directory in pages of 1000 names (Meta::ReaddirPage, one read
// transaction per page), so a directory of millions of entries costs one page of memory
// and is read once, never once per page. Files are written through the vfs under a
// temporary name (temp_name.h), their attributes set, and renamed into place.
#pragma once

#include <memory>
#include <string>

#include "client/volume.h"
#include "sync/side.h"

namespace tierfs::sync {

// path: an absolute path in the volume ("/" the root). A destination's missing
// directories on the way are made.
Result<std::unique_ptr<Side>> OpenVolumeSide(const client::VolumeOptions& options, const std::string& path,
                                             bool create);

}  // namespace tierfs::sync
