// What a well-formed metadata record holds. Checked where records are read without a
// request that would fail on them anyway (dump and metadata backups, Readdir, fsck): a
// stored record that fails is damaged, reported with its key and never silently left out;
// and where a dump is loaded: a dump holding such a value is refused. Both use the same
// checks, so that whatever a dump writes, a load accepts.
//
// Each check returns "" when the value is fine, else what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "meta/types.h"

namespace tierfs::record_check {

// A directory entry's name: 1 to 255 bytes, neither "." nor "..", without '/' or NUL.
std::string EntryName(std::string_view name);
// The type stored in an entry (S_IFMT >> 12): one of the seven file types.
std::string EntryType(uint32_t type);
// A directory entry's value: u64 inode (not 0) and u8 type; sets *ino and *type.
std::string EntryValue(std::string_view v, Ino* ino, uint32_t* type);
// Attributes (after DecodeAttr): a file type and permission bits only, user and group ids
// other than (uid_t)-1, a length within kMaxFileSize, no allocation past the length, known
// flags. The link count is judged by the caller (0 is an unlinked inode).
std::string Attributes(const Attr& a);
// A chunk record (after DecodeSliceRecord): inside its 64 MiB chunk, inside its slice.
std::string ChunkRecord(const SliceRecord& r);
// Extended attributes: a name of 1 to 255 bytes, a value of at most 64 KiB.
std::string XattrName(std::string_view name);
std::string XattrValue(std::string_view value);
// A symlink target: 1 to 4096 bytes without NUL.
std::string SymlinkTarget(std::string_view target);

// Logs a damaged record met while serving a request (with its key, and that fsck shows and
// repairs it), once per key per process: a directory listed again and again logs once.
void LogDamaged(const DamagedRecord& d);

}  // namespace tierfs::record_check
