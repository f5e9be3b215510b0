// One key of a sync side, as the merge sees it.
//
// Keys are paths relative to the side's root, '/'-separated, and a directory's key ends in
// '/' ("a/", "a/b/"). Every side lists its keys in byte order of these strings, so that
// "a.txt" < "a/" < "a/x" < "a0": the order S3 lists in, which a POSIX tree walk gives when
// each directory's name is sorted with its trailing '/' (tree_lister.h).
#pragma once

#include <cstdint>
#include <string>

namespace tierfs::sync {

enum class Kind : uint8_t { kFile, kDir, kSymlink };

struct Entry {
  std::string key;
  Kind kind = Kind::kFile;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t mode = 0;  // permission bits (07777); 0 when the side has none (object stores)
  uint32_t uid = 0, gid = 0;
  std::string target;  // symlinks: what they point to
  // Hard links on POSIX sides: the file's identity and link count (nlink > 1 only).
  uint64_t dev = 0, ino = 0;
  uint32_t nlink = 1;
  std::string md5;  // hex MD5 of the content when the side already knows it (S3 ETags), else ""

  bool is_dir() const { return kind == Kind::kDir; }
};

// The summary of a run; every key found lands in exactly one of copied, skipped, failed
// (found == copied + skipped + failed), and deleted counts keys removed (from the
// destination with --delete-dst, from the source with --delete-src).
struct Counts {
  uint64_t found = 0, copied = 0, skipped = 0, deleted = 0, failed = 0, bytes = 0;
  uint64_t checked = 0;  // --check-new / --check-all: keys compared after the copy
};

}  // namespace tierfs::sync
