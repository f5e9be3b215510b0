#include "meta/record_check.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <mutex>
#include <set>

#include "common/encoding.h"
#include "meta/key_schema.h"
#include "meta/slice_map.h"

namespace tierfs::record_check {

namespace {
// The limits Meta enforces on every change (meta_internal.h).
constexpr size_t kMaxName = 255, kMaxXattrName = 255, kMaxXattrValue = 65536, kMaxSymlink = 4096;
constexpr uint32_t kKnownFlags = kAttrAccessAcl | kAttrDefaultAcl | kAttrLinkable | kAttrInTrash;
}  // namespace

std::string EntryName(std::string_view name) {
  if (name.empty()) return "an empty name";
  if (name == "." || name == "..") return "the name '" + std::string(name) + "', which no entry may have";
  if (name.size() > kMaxName) return "a name of " + std::to_string(name.size()) + " bytes (at most 255)";
  if (name.find('/') != std::string_view::npos) return "a name containing '/'";
  if (name.find('\0') != std::string_view::npos) return "a name containing a NUL byte";
  return "";
}

std::string EntryType(uint32_t type) {
  switch (type << 12) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
    case S_IFSOCK:
      return "";
    default:
      return "file type " + std::to_string(type) + ", which is none";
  }
}

std::string EntryValue(std::string_view v, Ino* ino, uint32_t* type) {
  if (v.size() != 9) return "a value of " + std::to_string(v.size()) + " bytes (an entry holds 9)";
  ByteReader r(v);
  *ino = r.U64();
  *type = r.U8();
  if (*ino == 0) return "inode 0, which does not exist";
  return EntryType(*type);
}

std::string Attributes(const Attr& a) {
  if (std::string t = EntryType((a.mode & S_IFMT) >> 12); !t.empty()) return "mode " + std::to_string(a.mode) + ": " + t;
  if ((a.mode & ~(S_IFMT | 07777u)) != 0) return "mode " + std::to_string(a.mode) + " with unknown bits";
  if (a.uid == UINT32_MAX) return "user id 4294967295 ((uid_t)-1, which no file may have)";
  if (a.gid == UINT32_MAX) return "group id 4294967295 ((gid_t)-1, which no file may have)";
  if (a.length > kMaxFileSize) return "length " + std::to_string(a.length) + ", beyond the 1 PiB file size limit";
  if (a.allocated > (a.length + 4095) / 4096 * 4096) {
    return std::to_string(a.allocated) + " allocated bytes for a length of " + std::to_string(a.length);
  }
  if ((a.flags & ~kKnownFlags) != 0) return "unknown flags " + std::to_string(a.flags & ~kKnownFlags);
  return "";
}

std::string ChunkRecord(const SliceRecord& r) {
  if (r.pos >= kChunkSize || uint64_t{r.pos} + r.len > kChunkSize) {
    return "bytes [" + std::to_string(r.pos) + ", " + std::to_string(uint64_t{r.pos} + r.len) +
           ") outside its 64 MiB chunk";
  }
  if (r.id == 0) {
    if (r.size > kUnwrittenSize) return "a hole of size " + std::to_string(r.size);
  } else if (r.size == 0 || r.size > kChunkSize || uint64_t{r.off} + r.len > r.size) {
    return "bytes [" + std::to_string(r.off) + ", " + std::to_string(uint64_t{r.off} + r.len) + ") of slice " +
           std::to_string(r.id) + ", which holds " + std::to_string(r.size);
  }
  if ((r.flags & ~kRecordMayBePacked) != 0) return "unknown flags " + std::to_string(r.flags);
  return "";
}

std::string XattrName(std::string_view name) {
  if (name.empty()) return "an empty extended attribute name";
  if (name.size() > kMaxXattrName) return "an extended attribute name of " + std::to_string(name.size()) + " bytes";
  return "";
}

std::string XattrValue(std::string_view value) {
  if (value.size() > kMaxXattrValue) {
    return "an extended attribute value of " + std::to_string(value.size()) + " bytes (at most 65536)";
  }
  return "";
}

std::string SymlinkTarget(std::string_view target) {
  if (target.empty()) return "an empty symlink target";
  if (target.size() > kMaxSymlink) return "a symlink target of " + std::to_string(target.size()) + " bytes";
  if (target.find('\0') != std::string_view::npos) return "a symlink target containing a NUL byte";
  return "";
}

void LogDamaged(const DamagedRecord& d) {
  static std::mutex mu;
  static std::set<std::string> logged;  // at most 10000 keys, then every one is logged
  {
    std::lock_guard<std::mutex> l(mu);
    if (logged.count(d.key)) return;
    if (logged.size() < 10000) logged.insert(d.key);
  }
  spdlog::error("damaged metadata: {}: {}; skipped (`tierfs fsck` reports it, `--repair` removes a damaged entry)",
                keys::Describe(d.key), d.what);
}

}  // namespace tierfs::record_check
