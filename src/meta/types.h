// Plain metadata types shared by the semantics layer, the chunk layer and the vfs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tierfs {

using Ino = uint64_t;
constexpr Ino kRootIno = 1;
// The trash (`.trash` at the root, meta_trash.cc): a directory outside the namespace tree,
// found by name only from the root, holding one directory per hour of deletions. Above every
// inode number the volume hands out.
constexpr Ino kTrashIno = 0x7fffffff00000000ull;

// Logical layout, fixed for every volume (DESIGN.md section 2).
constexpr uint64_t kChunkBits = 26;
constexpr uint64_t kChunkSize = 1ull << kChunkBits;  // 64 MiB
constexpr uint64_t kMaxFileSize = 1ull << 50;        // 1 PiB

// One record of a chunk: the window [off, off+len) of slice `id` (of total `size` bytes)
// placed at byte `pos` of the chunk. id 0 is a hole (reads as zeros). Records are applied
// in ascending `seq`; later records shadow earlier ones.
struct SliceRecord {
  uint64_t seq = 0;
  uint32_t pos = 0;
  uint64_t id = 0;
  uint32_t size = 0;
  uint32_t off = 0;
  uint32_t len = 0;
  // kRecordMayBePacked: the slice may live inside a pack object (small-file packing); its
  // location is then its "PL" key, which readers look up (pack_* below; pack 0: not packed,
  // its block is stored on its own). Stored as an optional 25th byte of the record.
  uint8_t flags = 0;
  // Where the slice's bytes are when packed: [pack_off, pack_off+size) of the pack object
  // `pack`, which is pack_len bytes long. Filled by Meta when reading; never stored in the
  // record (a pack can be rewritten, its members moved, without touching the records).
  uint64_t pack = 0;
  uint32_t pack_len = 0;
  uint32_t pack_off = 0;
  bool operator==(const SliceRecord&) const = default;
};
constexpr uint8_t kRecordMayBePacked = 1;

// Attr::flags bits. An inode with neither ACL bit costs no read of its ACL keys.
// (POSIX ACLs, src/meta/acl.h: the ACL itself is the xattr of the same name.)
constexpr uint32_t kAttrAccessAcl = 1u << 0;   // has system.posix_acl_access
constexpr uint32_t kAttrDefaultAcl = 1u << 1;  // directory with system.posix_acl_default
// An O_TMPFILE file opened without O_EXCL: it may be linked although its nlink is 0.
constexpr uint32_t kAttrLinkable = 1u << 8;
// In the trash: removed by unlink, rmdir or a replacing rename and kept until the trash's
// retention ends. Read-only; only its owner and root may read it.
constexpr uint32_t kAttrInTrash = 1u << 9;

// File types, stored in the top bits of Attr::mode exactly as S_IFMT.
struct Attr {
  uint32_t mode = 0;  // S_IFMT | permission bits
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 0;
  uint64_t length = 0;  // bytes; for directories a nominal 4096; for symlinks the target length
  uint64_t rdev = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  Ino parent = 0;     // the parent directory (files with several links: the first one; see meta_quota.cc)
  uint32_t flags = 0;
  uint64_t seq = 0;   // per-inode commit sequence, orders chunk records and truncations
  // Regular files: bytes that hold data (st_blocks), never more than the length rounded
  // up to 4 KiB. An upper bound, not exact: data written over data counts again (up to
  // the length), so a sparse file looks sparse but a rewritten one may look fuller than it is.
  uint64_t allocated = 0;

  bool IsDir() const;
  bool IsRegular() const;
  bool IsSymlink() const;
};

struct DirEntry {
  std::string name;
  Ino ino = 0;
  uint32_t type = 0;  // S_IFMT bits
  Attr attr;          // filled when asked for (readdirplus)
  std::optional<std::string> xattr;  // Meta::ReaddirPage's xattr of the entry, when asked for and set
};

// A stored record that cannot be decoded or holds values the file system never writes
// (damaged metadata): its key and what is wrong, for logs, fsck and dump.
struct DamagedRecord {
  std::string key;
  std::string what;
};

}  // namespace tierfs
