// Dump and load of a whole volume as JSON, for moving a volume between metadata engines
// (`tierfs dump` / `tierfs load`) and for backups of the metadata.
//
// The document holds the format record, the counters, every inode with its attributes,
// directory entries, chunk records, truncation masks, xattrs and symlink target, and the
// pending deletions, all decoded (binary names and values in base64), so that it does not
// depend on any one engine's storage. Sessions and locks belong to live clients and are
// not dumped; neither are files unlinked while open (nlink 0), whose blocks gc collects.
// The secret key and session token are left out unless keep_secrets.
//
// Dump reads in batches of read-only transactions: a dump of an idle volume is exact; a
// dump taken while clients write is not one snapshot (stop writers, or mount read-only).
//
// Damaged metadata is never left out silently: a record that cannot be decoded, or holds
// values the file system never writes (meta/record_check.h), makes the dump fail (EIO)
// naming every such record (DumpStats::damaged). Without skip_damaged the document stops
// at the first one, unfinished, so that no load accepts it; with skip_damaged it is
// complete but for those records (an inode whose attributes are damaged is left out
// whole), and the dump still fails. Load validates every field of every record the same
// way before it writes anything, and refuses a dump naming the first bad entry.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <vector>

#include "common/status.h"
#include "meta/kv_engine.h"
#include "meta/types.h"

namespace tierfs {

struct DumpStats {
  uint64_t inodes = 0;
  uint64_t entries = 0;
  uint64_t slices = 0;  // chunk records
  uint64_t keys = 0;    // engine keys written (load) or read (dump)
  uint64_t dropped_entries = 0;  // load with skip_dangling: entries whose inode was missing
  std::vector<DamagedRecord> damaged;  // dump: records that could not be read (at most 100000)
  bool finished = false;               // dump: every record was read (it failed only for damage)
};

using DumpProgress = std::function<void(const DumpStats&)>;

Status DumpVolume(KvEngine* engine, std::ostream& out, bool keep_secrets, const DumpProgress& progress,
                  DumpStats* stats, bool skip_damaged = false);
// Loads a dump into an engine that holds no keys at all. A directory entry pointing at an
// inode the dump lacks makes it refuse, unless skip_dangling: then such entries are left
// out (a backup taken while files were being deleted; fsck then fixes link counts).
Status LoadVolume(KvEngine* engine, std::istream& in, const DumpProgress& progress, DumpStats* stats,
                  bool skip_dangling = false);

}  // namespace tierfs
