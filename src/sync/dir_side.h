// A local (or mounted) directory as a sync side. Keys are paths below the root; symlinks
// are never followed (listed as links; copied as links with --links, else skipped by the
// syncer); special files (devices, sockets, FIFOs) are left out of listings.
//
// Listing reads each directory whole and sorts its names (readdir has no order), so a
// directory of N entries costs about 100 bytes x N while it is walked.
#pragma once

#include <memory>
#include <string>

#include "sync/side.h"

namespace tierfs::sync {

// root must exist as a directory when it is a source; a destination's root is created
// (create), or may be missing and then lists as empty (a dry run's destination).
Result<std::unique_ptr<Side>> OpenDirSide(const std::string& root, bool create, bool may_be_missing = false);

}  // namespace tierfs::sync
