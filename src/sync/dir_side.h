// A local (or mounted) directory as a sync side. Keys are paths below the root; symlinks
// are never followed (listed as links; copied as links with --links, else skipped by the
// syncer); special files (devices, sockets, FIFOs) are left out of listings.
//
// Listing reads each directory's names and sorts them (readdir has no order) with bounded
// memory (sorted_names.h: sorted runs spilled to a temporary file past 65,536 names), then
// stats each entry as the walk reaches it, through the directory's descriptor, which the
// listing holds open while it walks that directory.
#pragma once

#include <memory>
#include <string>

#include "sync/side.h"

namespace tierfs::sync {

// root must exist as a directory when it is a source; a destination's root is created
// (create), or may be missing and then lists as empty (a dry run's destination).
Result<std::unique_ptr<Side>> OpenDirSide(const std::string& root, bool create, bool may_be_missing = false);

}  // namespace tierfs::sync
