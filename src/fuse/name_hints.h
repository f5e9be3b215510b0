// Names this mount handed to the kernel (lookups, creates, readdirplus), remembered per
// inode so that the access log and slow-request lines find a path with one read per level
// (Meta::PathOf's hint) instead of scanning each parent's entries: without them, reading
// files of a 20,000-entry directory ran 7x slower while .accesslog was open.
//
// A hint may be stale (a rename, an unlink): PathOf checks each one. Bounded: past
// kMaxNameHints inodes the table starts over.
//
// Threads: any; one mutex.
#pragma once

#include <string>
#include <string_view>

#include "meta/types.h"

namespace tierfs::fuse_internal {

inline constexpr size_t kMaxNameHints = 200000;

void NoteName(Ino ino, Ino parent, std::string_view name);
// Meta::PathHint over the table.
bool FindName(Ino ino, Ino* parent, std::string* name);

}  // namespace tierfs::fuse_internal
