// Every key the semantics layer stores, in one place. docs/key-schema.md describes the
// values; this file builds and parses the keys. Integers in keys are big-endian so ordered
// scans visit them numerically.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "meta/types.h"

namespace tierfs::keys {

// "V": the volume's format record (JSON).
std::string Format();
// "C" name: a u64 counter (nextInode, nextSlice, usedSpace, totalInodes, nextSession).
std::string Counter(std::string_view name);
// "A" ino "I": the inode's attributes (attr.h).
std::string Inode(Ino ino);
// Inode(ino) is kInodeKeyHead + ino (8 bytes, as in a dentry value) + kInodeKeyTail.
inline constexpr std::string_view kInodeKeyHead = "A";
inline constexpr std::string_view kInodeKeyTail = "I";
// "A" ino "D" name -> child ino (u64) + type (u8, S_IFMT >> 12).
std::string Dentry(Ino parent, std::string_view name);
std::string DentryPrefix(Ino parent);
// "A" ino "C" index(u32) seq(u64) -> one slice record of chunk `index`.
std::string ChunkRecord(Ino ino, uint32_t index, uint64_t seq);
std::string ChunkPrefix(Ino ino, uint32_t index);
std::string ChunksPrefix(Ino ino);
// "A" ino "T" seq(u64) -> u64 length: a truncation mask not yet applied to the records.
std::string TruncRule(Ino ino, uint64_t seq);
std::string TruncRulesPrefix(Ino ino);
// "A" ino "X" name -> xattr value.
std::string Xattr(Ino ino, std::string_view name);
std::string XattrPrefix(Ino ino);
// "A" ino "S" -> symlink target.
std::string Symlink(Ino ino);
// "A" ino "F" sid owner -> u8 flock type;  "A" ino "P" sid owner -> record lock ranges.
std::string Flock(Ino ino, uint64_t sid, uint64_t owner);
std::string FlockPrefix(Ino ino);
std::string Plock(Ino ino, uint64_t sid, uint64_t owner);
std::string PlockPrefix(Ino ino);
std::string InodePrefix(Ino ino);  // "A" ino: everything of one inode
// "K" id(u64) size(u32) -> i64 extra references of a shared slice (absent = 1 reference).
std::string SliceRef(uint64_t id, uint32_t size);
// "X" id(u64) size(u32) -> i64 time: a slice whose blocks await deletion.
std::string PendingSlice(uint64_t id, uint32_t size);
constexpr std::string_view kPendingSlicePrefix = "X";
// "CU" sid(u64) slot(u32) -> i64 bytes, i64 inodes: a session's share of the usage counters,
// one slot per thread, written by the transactions that change usage (summed with "C"
// usedSpace/totalInodes).
std::string UsageShard(uint64_t sid, uint32_t slot);
std::string UsageShardPrefix(uint64_t sid);
constexpr std::string_view kUsageShardPrefix = "CU";
// "W" id(u64) -> u64 sid + host: a slice committed while its blocks were staged for
// write-back by that session (`mount --writeback`), not yet all in the object store.
std::string Staged(uint64_t id);
constexpr std::string_view kStagedPrefix = "W";
// Small-file packing. "PL" id(u64) -> u64 pack, u32 pack_len, u32 off: slice id lives at
// [off, off+size) of pack object `pack` (chunk/block_key.h PackKey). "PM" pack(u64) id(u64)
// -> u32 pack_len, u32 off, u32 size: the pack's live members (a pack with none is dead).
// "PX" pack(u64) len(u32) -> i64 time: a dead pack object, deleted from that time on.
std::string PackLocation(uint64_t id);
std::string PackMember(uint64_t pack, uint64_t id);
std::string PackMembersPrefix(uint64_t pack);
constexpr std::string_view kPackMemberPrefix = "PM";
std::string PendingPack(uint64_t pack, uint32_t len);
constexpr std::string_view kPendingPackPrefix = "PX";
// PM keys -> pack and member; PX keys -> pack and length.
bool ParsePackMemberKey(std::string_view key, uint64_t* pack, uint64_t* id);
bool ParsePendingPackKey(std::string_view key, uint64_t* pack, uint32_t* len);
// Any key of one inode ("A" ino kind rest...): its inode, kind ('I', 'D', 'C', 'X', ...)
// and what follows (a dentry's name, an xattr's name...).
bool ParseInodeKey(std::string_view key, Ino* ino, char* kind, std::string_view* rest);
// "BK" -> u64 last_ns, u64 sid, u64 until_ns: metadata backups (tools/meta_backup.h): when
// the last one finished, and the session whose turn it is until until_ns (0: nobody's).
std::string BackupTurn();
// "L" ino(u64) -> u64 length: an unlinked file whose chunks await deletion.
std::string PendingFile(Ino ino);
constexpr std::string_view kPendingFilePrefix = "L";
// "T" ino(u64) seq(u64) -> empty: index of truncation rules awaiting cleanup.
std::string PendingTrunc(Ino ino, uint64_t seq);
constexpr std::string_view kPendingTruncPrefix = "T";
// "SE" sid -> session info (JSON); "SH" sid -> u64 heartbeat (ns); "SO" sid ino -> open
// but unlinked inode held by the session.
std::string Session(uint64_t sid);
constexpr std::string_view kSessionPrefix = "SE";
std::string Heartbeat(uint64_t sid);
std::string Sustained(uint64_t sid, Ino ino);
std::string SustainedPrefix(uint64_t sid);
// "SP" sid -> JSON: a session another client ended because its heartbeats stopped
// (PurgedSession), kept a day after its leftovers were cleaned.
std::string PurgedSession(uint64_t sid);
constexpr std::string_view kPurgedSessionPrefix = "SP";
// "SD" -> u64 ns: `tierfs destroy` began at that time; no new session may start.
std::string Destroying();
// "SW" sid -> JSON {host, dir, started_ns}: the staging area of a session that writes back
// (`mount --writeback`); outlives the session until no "W" mark of it is left, so that the
// blocks a killed client staged can be found (status, fsck) after its session was purged.
std::string StagingArea(uint64_t sid);
constexpr std::string_view kStagingAreaPrefix = "SW";
// "GU" access-key -> JSON {access_key, secret_key, uid, gid, read_only, buckets,
// display_name}: a user of the volume's S3 gateways (src/gateway/users.h). Dumped and loaded.
constexpr std::string_view kGatewayUserPrefix = "GU";
// "SL" sid ino -> empty: the session holds locks on ino (so a dead session's locks are found).
std::string SessionLock(uint64_t sid, Ino ino);
std::string SessionLockPrefix(uint64_t sid);

// The scan group of a key: the prefix an engine without ordered keys (Redis) indexes the
// key under, chosen so that every scan the semantics layer does, except whole-table walks
// (fsck, gc, dump over all "A" keys), stays inside one group. "A" ino kind and "SO"/"SL"
// sid: the first 10 bytes; other "S" keys: 2 bytes; everything else: the first byte. A key
// shorter than its natural group length is its own (short) group; the empty key's group is
// empty. The result is a prefix of key (a view into it).
std::string_view ScanGroup(std::string_view key);
// True when group has its natural length, so every key starting with group belongs to it
// and a scan inside [group, PrefixEnd(group)) reads that group alone.
bool IsFullScanGroup(std::string_view group);
// Longest group ScanGroup returns.
constexpr size_t kMaxScanGroupLength = 10;

// Parsing helpers for scans; return false on malformed keys.
bool ParseDentryName(std::string_view key, std::string_view* name);
bool ParseChunkRecordKey(std::string_view key, uint32_t* index, uint64_t* seq);
bool ParseSliceKey(std::string_view key, uint64_t* id, uint32_t* size);  // K or X keys
bool ParseInoKey(std::string_view key, Ino* ino);                        // L keys, SE/SH/SO
uint64_t DecodeU64(std::string_view v);
std::string EncodeU64(uint64_t v);

// A key described for people, for messages about damaged records: what it is ("attributes
// of inode 12", "entry 'a' of directory 1", ...) and its bytes in hex, to find it in the
// engine by hand (sqlite3: `... WHERE k = x'HEX'`; Redis: the string "k" + the bytes).
std::string Describe(std::string_view key);
// Bytes as lower-case hex.
std::string Hex(std::string_view bytes);
// A name for messages: control bytes, quotes and backslashes as \xNN, the rest as is.
std::string Quote(std::string_view name);

}  // namespace tierfs::keys
