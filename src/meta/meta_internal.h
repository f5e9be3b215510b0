// Helpers shared by the files that implement Meta (meta*.cc). Not for other modules.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "common/encoding.h"
#include "meta/attr.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"
#include "meta/quota_tx.h"

namespace tierfs {
struct SessionInfo;
}  // namespace tierfs

namespace tierfs::internal {

// meta_session.cc: a session record's JSON (key "SE").
std::string SessionJson(const SessionInfo& info);
SessionInfo ParseSession(uint64_t sid, std::string_view v);

// meta_pack.cc. Fills the pack location of every record flagged kRecordMayBePacked whose
// slice has one.
Status ResolvePacksTx(KvTxn& t, std::vector<SliceRecord>* recs);
// The slice lost its last reference: when it is packed, its location and membership go
// (and the pack, if that was its last member, awaits deletion) and *packed is set.
Status ReleasePackedTx(KvTxn& t, uint64_t id, bool* packed);

inline Status GetAttrTx(KvTxn& t, Ino ino, Attr* a) {
  auto v = t.Get(keys::Inode(ino));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Status::Err(ENOENT, "inode " + std::to_string(ino) + " does not exist");
  if (!DecodeAttr(**v, a)) return Status::Err(EIO, "inode " + std::to_string(ino) + " has corrupt attributes");
  return Status::OK();
}

inline Status PutAttrTx(KvTxn& t, Ino ino, const Attr& a) { return t.Put(keys::Inode(ino), EncodeAttr(a)); }

// Looks up a directory entry; ENOENT when absent.
inline Status GetDentryTx(KvTxn& t, Ino parent, const std::string& name, Ino* ino, uint32_t* type) {
  auto v = t.Get(keys::Dentry(parent, name));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Status::Err(ENOENT, "no entry '" + name + "'");
  ByteReader r(**v);
  *ino = r.U64();
  *type = static_cast<uint32_t>(r.U8()) << 12;
  if (!r.ok()) return Status::Err(EIO, "corrupt directory entry '" + name + "'");
  return Status::OK();
}

inline std::string EncodeDentry(Ino ino, uint32_t mode) {
  std::string v;
  PutU64(&v, ino);
  PutU8(&v, static_cast<uint8_t>((mode & 0170000) >> 12));
  return v;
}

constexpr size_t kMaxName = 255;
constexpr size_t kMaxXattrName = 255;
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxSymlink = 4096;

// A name for a directory entry: not empty, at most 255 bytes, no '/'.
inline Status CheckName(const std::string& name) {
  if (name.empty()) return Status::Err(ENOENT, "empty name");
  if (name.size() > kMaxName) return Status::Err(ENAMETOOLONG, "name longer than 255 bytes");
  if (name.find('/') != std::string::npos) return Status::Err(EINVAL, "name contains '/'");
  return Status::OK();
}

// What a lookup of `name` read (the directory entry's value, then the attributes of the
// inode it names) as (inode, attributes), for Lookup and LookupMany: ENOENT when either is
// absent, EIO when either is corrupt. parent: the directory's attributes, for the trash rule
// (other users' entries of a trash hour are not there for this user, see Readdir).
Status EntryFromValues(const Ctx& ctx, const Attr& parent, const std::string& name,
                       const std::optional<std::string>& entry, const std::optional<std::string>& child, Ino* ino,
                       Attr* attr);

inline Status NotDir(Ino ino) { return Status::Err(ENOTDIR, "inode " + std::to_string(ino) + " is not a directory"); }

// Sticky directories: only the owner of the entry, the owner of the directory, or root may
// remove or rename it.
inline Status CheckSticky(const Ctx& ctx, const Attr& dir, const Attr& child) {
  if ((dir.mode & S_ISVTX) && ctx.uid != 0 && ctx.uid != dir.uid && ctx.uid != child.uid) {
    return Status::Err(EPERM, "sticky directory: only the owner may remove or rename this entry");
  }
  return Status::OK();
}

// The trash's name at the root, and whether an inode is the trash, one of its hour
// directories or an entry in it (meta_trash.cc).
inline constexpr const char* kTrashName = ".trash";
inline bool InTrash(Ino ino, const Attr& a) {
  return ino == kTrashIno || a.parent == kTrashIno || (a.flags & kAttrInTrash);
}
inline Status TrashReadOnly() { return Status::Err(EPERM, "the trash is read-only (use `tierfs restore`)"); }

// A regular file grows by `bytes` (ChargedBytes): its quotas are charged and checked, when
// it is in the namespace (not unlinked while open, not in the trash).
inline Status ChargeFileQuotasTx(KvTxn& t, Ino ino, const Attr& a, int64_t bytes) {
  if (bytes == 0 || a.nlink == 0 || InTrash(ino, a)) return Status::OK();
  QuotaTx quota(t);
  return quota.ChargeIn(a.parent, a.uid, a.gid, bytes, 0, bytes > 0);
}

// Space charged for a file of this length (4 KiB granularity, like a block device).
inline int64_t ChargedBytes(uint64_t length) { return static_cast<int64_t>((length + 4095) / 4096 * 4096); }

// A chunk's records plus the file's truncation masks as hole records, in commit order. EIO
// naming the key when a record cannot be decoded (DamagedChunkRecord).
Status DamagedChunkRecord(std::string_view key);
Status ReadChunkTx(KvTxn& t, Ino ino, uint32_t index, std::vector<SliceRecord>* out);

// Allocation (Attr::allocated, st_blocks, SEEK_DATA/SEEK_HOLE) is counted in blocks of
// this size, as ext4 counts its blocks: a block holding any data counts whole.
constexpr uint64_t kAllocUnit = 4096;
// Counts `bytes` more as allocated (Attr::allocated), up to the length rounded to 4 KiB.
void AddAllocated(Attr* a, uint64_t bytes);
// Bytes of the kAllocUnit blocks that [off, off+len) touches.
uint64_t BlockSpan(uint64_t off, uint64_t len);

// Bytes of the blocks overlapping [begin, end) of the file that hold an allocated byte
// (data, or zeros from fallocate) inside the range; reads only the chunks of the range that
// have records.
Result<uint64_t> AllocatedBlocksTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end);
// Bytes of the blocks that punching [begin, end) leaves without an allocated byte.
Result<uint64_t> PunchedBlocksTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end);
// The parts of [begin, end) that are not allocated, in file order.
Status UnallocatedTx(KvTxn& t, Ino ino, uint64_t begin, uint64_t end, std::vector<std::pair<uint64_t, uint64_t>>* out);

inline Status ScanPrefix(KvTxn& t, const std::string& prefix, size_t limit, const KvTxn::ScanFn& fn) {
  return t.Scan(prefix, PrefixEnd(prefix), limit, fn);
}

}  // namespace tierfs::internal
