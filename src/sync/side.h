// A side of `tierfs sync`: what the merge lists, reads from and writes to. Three kinds:
// a local (or mounted) directory (dir_side.h), an object store bucket and prefix: S3,
// RADOS, Azure, a file-store directory (store_side.h), and a path inside a TierFS volume
// opened through the client library with no mount (volume_side.h). side_spec.h turns a
// command-line argument into one.
//
// Contract every side keeps:
//   - List streams keys (entry.h) in byte order from `start` on; an error while listing is
//     returned as an error from Next, never as the end of the listing (files behind a
//     failed page would look deleted and --delete-dst would remove them).
//   - Put makes a file appear whole or not at all: POSIX sides write a temporary name in
//     the same directory (temp_name.h) and rename it; object stores put one object (one
//     multipart upload when large). Put leaves the key's modification time equal to the
//     entry's where the side can set it.
//   - Every method may be called from several threads at once, except that one KeyStream
//     or Reader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sync/entry.h"

namespace tierfs::sync {

class KeyStream {
 public:
  virtual ~KeyStream() = default;
  // The next key into *e: true, or false at the end of the listing.
  virtual Result<bool> Next(Entry* e) = 0;
};

class Reader {
 public:
  virtual ~Reader() = default;
  // Up to n bytes at off; fewer only at the end of the data.
  virtual Result<size_t> Read(uint64_t off, char* buf, size_t n) = 0;
};

// Where a copy's bytes come from and how fast they may go: Put pulls through it.
struct Source {
  Reader* reader = nullptr;
  uint64_t size = 0;
  // Called with each piece read (bandwidth limit, progress, MD5 of what was sent); may be null.
  std::function<void(const char* data, size_t n)> on_bytes;
};

// Whether a POSIX side descends into directory `e` (an excluded directory is not walked).
using Descend = std::function<bool(const Entry& e)>;
// Which children of directory dir_key ("" the top, "a/b/") a POSIX side lists: null for all
// of them, else only these names, sorted (an incremental round: changes.h).
using NameList = std::shared_ptr<const std::vector<std::string>>;
using Children = std::function<Result<NameList>(const std::string& dir_key)>;

// What changed on a source volume between two points of its change log, as keys below the
// side's top.
struct SourceChanges {
  // Entries ("a/b/name") made, removed, renamed or replaced, or whose attributes or data
  // changed (a directory's: when its entries changed).
  std::set<std::string> keys;
  // Of those, the entries made, removed, renamed or replaced: only these can be a directory
  // on one side and not on the other (changes.h).
  std::set<std::string> entries;
};

// A TierFS volume's change log seen from a side (volume_side.cc), for incremental rounds
// (changes.h).
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  virtual std::string volume_uuid() const = 0;
  // Whether the volume keeps a change log (FormatRecord::changelog_hours).
  virtual bool logging() const = 0;
  // The oldest record kept and the newest committed (0: none).
  virtual Result<std::pair<uint64_t, uint64_t>> Bounds() = 0;
  // What records [from, to] changed; false in *exact when a change cannot be placed in a
  // directory (a file with several names changed): then the round must list everything.
  virtual Result<SourceChanges> Changed(uint64_t from, uint64_t to, bool* exact) = 0;
};

class Side {
 public:
  virtual ~Side() = default;
  virtual std::string Describe() const = 0;
  // Directories, modes, owners, symlinks and hard links exist (directories and volumes).
  virtual bool posix() const = 0;
  // The finest modification time the side keeps, in ns (1 for ext4 and volumes, 1e9 for S3).
  virtual int64_t mtime_precision_ns() const = 0;
  // The side cannot set modification times: a key's time is when it was written (object
  // stores), so "unchanged" means the same size and a time not older than the source's.
  virtual bool mtime_is_write_time() const { return !posix(); }

  // children: POSIX sides only (object stores list flat and ignore it).
  virtual Result<std::unique_ptr<KeyStream>> List(const std::string& start, const Descend& descend,
                                                  const Children& children = nullptr) = 0;
  virtual Result<std::unique_ptr<Reader>> Open(const Entry& e) = 0;
  // Writes e.key (a file) with src's bytes; sets the modification time, and with perms
  // the mode and owner, before the file becomes visible.
  virtual Status Put(const Entry& e, Source& src, bool perms) = 0;
  // Makes directory e.key (and missing parents); EEXIST is success. Object stores keep
  // a zero-length "KEY/" marker object.
  virtual Status Mkdir(const Entry& e) = 0;
  // Makes symlink e.key -> e.target with e's time (and owner with perms), in one step.
  virtual Status Symlink(const Entry& e, bool /*perms*/) { return NotPosix("make symlink " + e.key); }
  // Makes new_key another name of existing_key (hard link).
  virtual Status Link(const std::string& /*existing_key*/, const std::string& new_key) {
    return NotPosix("link " + new_key);
  }
  // Sets e's modification time and, with perms, its mode and owner (directories after
  // their contents were written).
  virtual Status SetAttrs(const Entry& /*e*/, bool /*perms*/) { return Status::OK(); }
  // Removes a file, symlink or empty directory (ENOENT is success).
  virtual Status Remove(const Entry& e) = 0;
  // Removes directory key (no trailing '/') and everything below it: a source file whose
  // name a destination directory holds replaces it with --delete-dst, as rsync does.
  virtual Status RemoveAll(const std::string& key) { return NotPosix("remove directory " + key); }
  // Extended attributes (user.* and the like) of a POSIX side's key.
  virtual Result<std::vector<std::pair<std::string, std::string>>> Xattrs(const Entry& /*e*/) {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  virtual Status SetXattrs(const Entry& e, const std::vector<std::pair<std::string, std::string>>& x) {
    return x.empty() ? Status::OK() : NotPosix("set extended attributes of " + e.key);
  }
  // Makes what Put wrote durable (local directories: syncfs); called once at the end.
  virtual Status Flush() { return Status::OK(); }
  // Whether directory key (no trailing '/') exists: an object store has one when a key
  // starts with KEY/. The default lists from KEY/.
  virtual Result<bool> IsDir(const std::string& key);
  // Threads that read directories ahead of the walk (POSIX sides; tree_lister.h).
  virtual void SetListThreads(int /*n*/) {}
  // The side's change log, when it is a TierFS volume; null otherwise.
  virtual ChangeFeed* change_feed() { return nullptr; }

 protected:
  Status NotPosix(const std::string& what) const {
    return Status::Err(EOPNOTSUPP, "cannot " + what + ": " + Describe() + " is an object store");
  }
};

}  // namespace tierfs::sync
