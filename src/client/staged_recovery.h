// What a mount does, before it serves, with blocks an earlier write-back client of the
// volume staged in one of its cache directories and never uploaded (it was killed): they
// hold data that was written and closed, and exist nowhere else. A read-write mount uploads
// them first (tools/staged_upload.h), whether or not it writes back itself; one that cannot
// (the store is not taking blocks, or the mount is read-only) refuses to start and says how
// to recover, so that nobody takes the staging folder for cache and deletes it.
#pragma once

#include <string>

#include "common/status.h"

namespace tierfs {
class Meta;
struct FormatRecord;
}  // namespace tierfs

namespace tierfs::client {

struct CacheArgs;

// skip_dir: the staging area this mount writes back through itself (it uploads what it
// holds in the background); "" for none.
Status RecoverStagedBlocks(const CacheArgs& cache, Meta* meta, bool read_only, const std::string& skip_dir,
                           const std::string& meta_url);
// For a mount that fails before it gets there (the store unreachable): what its cache
// directories hold staged and how to recover it, as a sentence to add to the error; ""
// when they hold nothing staged.
std::string StagedNote(const CacheArgs& cache, const FormatRecord& fmt, const std::string& meta_url);

}  // namespace tierfs::client
