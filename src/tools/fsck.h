// Consistency check of a volume: every directory entry points at an inode of the type it
// says, link counts match the entries, every inode is reachable, and every block object a
// file needs exists with the right size (with deep, that its every byte reads back and
// matches its checksums). Broken files are reported by path.
//
// Damaged metadata (records that cannot be decoded, meta/record_check.h) is reported with
// its key: directory entries (damaged-entry, which Readdir leaves out), inodes whose
// attributes are damaged (damaged-inode), chunk records of a file (damaged-record).
//
// Repairs only what needs no guess: wrong link counts are set to what the entries say, and
// entries pointing at missing inodes, and damaged entries, are removed. Missing data and unreachable inodes are
// reported, never invented or deleted. Runs from one thread; best run unmounted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {

class Meta;
class ObjectStore;

struct FsckOptions {
  std::string path = "/";  // check this subtree only (link counts of files need "/")
  bool repair = false;
  bool check_objects = true;
  // Read every referenced block in full, so the checksum layer verifies its contents
  // (bit rot, torn or overwritten objects), instead of only asking for its size.
  bool deep = false;
  int threads = 16;  // concurrent object checks (HEAD or GET)
  std::function<void(const std::string&)> progress;
};

struct FsckProblem {
  // dangling-entry, damaged-entry (repairable), damaged-inode, damaged-record, type-mismatch,
  // link-count, orphan, missing-object, bad-object-size,
  // corrupt-object, staged-object (staged for write-back on a client, not yet uploaded),
  // usage-counter (df's bytes or inodes differ from what the inodes hold; repairable)
  // change-log-gap, change-log-reader-lost (a registered reader, a mirror, whose records were
  // trimmed: it must be re-seeded or dropped)
  std::string kind;
  std::string path;
  std::string detail;
  bool repaired = false;
};

struct FsckReport {
  uint64_t dirs = 0, files = 0, others = 0, objects_checked = 0, bytes_verified = 0;
  std::vector<FsckProblem> problems;
  size_t Remaining() const;
};

Result<FsckReport> CheckVolume(Meta* meta, ObjectStore* store, const FsckOptions& opts);

}  // namespace tierfs
