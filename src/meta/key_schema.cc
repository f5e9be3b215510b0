#include "meta/key_schema.h"

#include <algorithm>

#include "common/encoding.h"

namespace tierfs::keys {
namespace {
std::string InoKey(char tag, Ino ino, char sub) {
  std::string k(1, tag);
  PutU64(&k, ino);
  k.push_back(sub);
  return k;
}
}  // namespace

std::string Format() { return "V"; }
std::string Counter(std::string_view name) { return "C" + std::string(name); }
std::string Inode(Ino ino) { return InoKey('A', ino, 'I'); }
std::string Dentry(Ino parent, std::string_view name) { return DentryPrefix(parent).append(name); }
std::string DentryPrefix(Ino parent) { return InoKey('A', parent, 'D'); }
std::string ChunkRecord(Ino ino, uint32_t index, uint64_t seq) {
  std::string k = ChunkPrefix(ino, index);
  PutU64(&k, seq);
  return k;
}
std::string ChunkPrefix(Ino ino, uint32_t index) {
  std::string k = ChunksPrefix(ino);
  PutU32(&k, index);
  return k;
}
std::string ChunksPrefix(Ino ino) { return InoKey('A', ino, 'C'); }
std::string TruncRule(Ino ino, uint64_t seq) {
  std::string k = TruncRulesPrefix(ino);
  PutU64(&k, seq);
  return k;
}
std::string TruncRulesPrefix(Ino ino) { return InoKey('A', ino, 'T'); }
std::string Xattr(Ino ino, std::string_view name) { return XattrPrefix(ino).append(name); }
std::string XattrPrefix(Ino ino) { return InoKey('A', ino, 'X'); }
std::string Symlink(Ino ino) { return InoKey('A', ino, 'S'); }
std::string Flock(Ino ino, uint64_t sid, uint64_t owner) {
  std::string k = FlockPrefix(ino);
  PutU64(&k, sid);
  PutU64(&k, owner);
  return k;
}
std::string FlockPrefix(Ino ino) { return InoKey('A', ino, 'F'); }
std::string Plock(Ino ino, uint64_t sid, uint64_t owner) {
  std::string k = PlockPrefix(ino);
  PutU64(&k, sid);
  PutU64(&k, owner);
  return k;
}
std::string PlockPrefix(Ino ino) { return InoKey('A', ino, 'P'); }
std::string InodePrefix(Ino ino) {
  std::string k("A");
  PutU64(&k, ino);
  return k;
}
std::string SliceRef(uint64_t id, uint32_t size) {
  std::string k("K");
  PutU64(&k, id);
  PutU32(&k, size);
  return k;
}
std::string PendingSlice(uint64_t id, uint32_t size) {
  std::string k("X");
  PutU64(&k, id);
  PutU32(&k, size);
  return k;
}
std::string UsageShard(uint64_t sid, uint32_t slot) {
  std::string k = UsageShardPrefix(sid);
  PutU32(&k, slot);
  return k;
}
std::string UsageShardPrefix(uint64_t sid) {
  std::string k(kUsageShardPrefix);
  PutU64(&k, sid);
  return k;
}
std::string Staged(uint64_t id) {
  std::string k("W");
  PutU64(&k, id);
  return k;
}
std::string BackupTurn() { return "BK"; }
std::string Destroying() { return "SD"; }
std::string PackLocation(uint64_t id) {
  std::string k("PL");
  PutU64(&k, id);
  return k;
}
std::string PackMembersPrefix(uint64_t pack) {
  std::string k(kPackMemberPrefix);
  PutU64(&k, pack);
  return k;
}
std::string PackMember(uint64_t pack, uint64_t id) {
  std::string k = PackMembersPrefix(pack);
  PutU64(&k, id);
  return k;
}
std::string PendingPack(uint64_t pack, uint32_t len) {
  std::string k(kPendingPackPrefix);
  PutU64(&k, pack);
  PutU32(&k, len);
  return k;
}
std::string PendingFile(Ino ino) {
  std::string k("L");
  PutU64(&k, ino);
  return k;
}
std::string PendingTrunc(Ino ino, uint64_t seq) {
  std::string k("T");
  PutU64(&k, ino);
  PutU64(&k, seq);
  return k;
}
std::string Session(uint64_t sid) {
  std::string k("SE");
  PutU64(&k, sid);
  return k;
}
std::string StagingArea(uint64_t sid) {
  std::string k(kStagingAreaPrefix);
  PutU64(&k, sid);
  return k;
}
std::string Heartbeat(uint64_t sid) {
  std::string k("SH");
  PutU64(&k, sid);
  return k;
}
std::string PurgedSession(uint64_t sid) {
  std::string k("SP");
  PutU64(&k, sid);
  return k;
}
std::string Sustained(uint64_t sid, Ino ino) {
  std::string k = SustainedPrefix(sid);
  PutU64(&k, ino);
  return k;
}
std::string SustainedPrefix(uint64_t sid) {
  std::string k("SO");
  PutU64(&k, sid);
  return k;
}

std::string SessionLock(uint64_t sid, Ino ino) {
  std::string k = SessionLockPrefix(sid);
  PutU64(&k, ino);
  return k;
}
std::string SessionLockPrefix(uint64_t sid) {
  std::string k("SL");
  PutU64(&k, sid);
  return k;
}

namespace {
// The group length every key starting with these bytes gets once it is long enough.
size_t NaturalGroupLength(std::string_view key) {
  if (key.empty()) return 0;
  if (key[0] == 'A') return 10;  // "A" ino(8) kind
  if (key[0] == 'S' && key.size() >= 2) return key[1] == 'O' || key[1] == 'L' ? 10 : 2;
  return 1;
}
}  // namespace

std::string_view ScanGroup(std::string_view key) {
  return key.substr(0, std::min(NaturalGroupLength(key), key.size()));
}

bool IsFullScanGroup(std::string_view group) {
  // "S" alone would get length 1 here but its extensions "SE", "SO"... have longer groups.
  if (group == "S") return false;
  return !group.empty() && group.size() == NaturalGroupLength(group);
}

bool ParseDentryName(std::string_view key, std::string_view* name) {
  if (key.size() < 10) return false;
  *name = key.substr(10);
  return true;
}
bool ParseChunkRecordKey(std::string_view key, uint32_t* index, uint64_t* seq) {
  if (key.size() != 22) return false;
  ByteReader r(key.substr(10));
  *index = r.U32();
  *seq = r.U64();
  return r.ok();
}
bool ParseSliceKey(std::string_view key, uint64_t* id, uint32_t* size) {
  if (key.size() != 13) return false;
  ByteReader r(key.substr(1));
  *id = r.U64();
  *size = r.U32();
  return r.ok();
}
bool ParsePackMemberKey(std::string_view key, uint64_t* pack, uint64_t* id) {
  if (key.size() != 18 || !key.starts_with(kPackMemberPrefix)) return false;
  ByteReader r(key.substr(2));
  *pack = r.U64();
  *id = r.U64();
  return r.ok();
}
bool ParseInodeKey(std::string_view key, Ino* ino, char* kind, std::string_view* rest) {
  if (key.size() < 10 || key[0] != 'A') return false;
  ByteReader r(key.substr(1, 8));
  *ino = r.U64();
  *kind = key[9];
  *rest = key.substr(10);
  return r.ok();
}
bool ParsePendingPackKey(std::string_view key, uint64_t* pack, uint32_t* len) {
  if (key.size() != 14 || !key.starts_with(kPendingPackPrefix)) return false;
  ByteReader r(key.substr(2));
  *pack = r.U64();
  *len = r.U32();
  return r.ok();
}
bool ParseInoKey(std::string_view key, Ino* ino) {
  size_t skip = (key.size() >= 2 && key[0] == 'S') ? 2 : 1;
  if (key.size() < skip + 8) return false;
  ByteReader r(key.substr(skip));
  *ino = r.U64();
  return r.ok();
}
uint64_t DecodeU64(std::string_view v) {
  ByteReader r(v);
  uint64_t x = r.U64();
  return r.ok() ? x : 0;
}
std::string EncodeU64(uint64_t v) {
  std::string s;
  PutU64(&s, v);
  return s;
}

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string Quote(std::string_view name) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string Describe(std::string_view key) {
  std::string what;
  if (key.size() >= 10 && key[0] == 'A') {
    std::string ino = std::to_string(DecodeU64(key.substr(1, 8)));
    std::string_view rest = key.substr(10);
    switch (key[9]) {
      case 'I':
        what = "attributes of inode " + ino;
        break;
      case 'D':
        what = "entry '" + Quote(rest) + "' of directory inode " + ino;
        break;
      case 'C': {
        uint32_t index = 0;
        uint64_t seq = 0;
        what = ParseChunkRecordKey(key, &index, &seq)
                   ? "record " + std::to_string(seq) + " of chunk " + std::to_string(index) + " of inode " + ino
                   : "chunk record of inode " + ino;
        break;
      }
      case 'T':
        what = "truncation mask of inode " + ino;
        break;
      case 'X':
        what = "extended attribute '" + Quote(rest) + "' of inode " + ino;
        break;
      case 'S':
        what = "symlink target of inode " + ino;
        break;
      default:
        what = "record of inode " + ino;
        break;
    }
  } else if (!key.empty()) {
    what = "record '" + Quote(key.substr(0, key[0] == 'C' || key[0] == 'S' || key[0] == 'P' || key[0] == 'Q' ? 2 : 1)) +
           "'";
  } else {
    what = "empty key";
  }
  return what + " (key " + Hex(key) + ")";
}

}  // namespace tierfs::keys
