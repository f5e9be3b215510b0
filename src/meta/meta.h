// POSIX semantics over a KvEngine: namespace, attributes, permissions, file layout,
// sessions and locks. Written once; every engine gets the same behaviour.
//
// Threads: every public method may be called from any thread concurrently. Each operation
// is one engine transaction (atomic); background work (heartbeat, counter flush, deletion
// of unlinked files and unreferenced slices, cleanup of dead sessions) runs on Meta's own
// thread once StartBackground() was called.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "object/object_store.h"
#include "meta/kv_engine.h"
#include "meta/quota_tx.h"
#include "meta/types.h"

namespace tierfs {

class ReleaseHold;

namespace acl {
struct Acl;
}  // namespace acl

// The caller of an operation. groups() is loaded lazily because reading a process's
// supplementary groups costs a /proc read; most checks never need it.
struct Ctx {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;
  // Applied by Mknod/Mkdir unless the parent directory has a default ACL, which replaces
  // it. FUSE passes the caller's umask (the kernel leaves it to us: FUSE_CAP_DONT_MASK).
  uint32_t umask = 0;
  std::function<std::vector<uint32_t>()> load_groups;  // may be empty
  // How the caller reached the inode, for a trash entry (kAttrInTrash): through .trash
  // (false, the default), where entries are read-only and only their owner and root may
  // read them; or (true) through a name or descriptor it had before the entry was removed
  // (the FUSE adapter tells them apart by the kernel's inode), for which it is the
  // unlinked file it is to POSIX: opened, changed and truncated as its mode allows.
  bool outside_trash = false;

  bool InGroup(uint32_t g) const;
  static Ctx Root() { return Ctx{}; }

 private:
  mutable bool groups_loaded_ = false;
  mutable std::vector<uint32_t> groups_;
};

// Format versions this tierfs reads and writes. 1: every object holds its checksum table in
// front of its data. 2: on stores with object metadata (S3, Azure), the table is the object's
// metadata and the object is exactly its data (object/checksum_store.h); elsewhere as 1.
// 3: as 2, and small files may be packed (slice records flagged kRecordMayBePacked, pack
// objects under packs/, "P" keys). Clients refuse versions newer than they know.
constexpr int kFormatVersion = 3;

// The volume's settings, fixed at format time (stored under key "V" as JSON).
struct FormatRecord {
  std::string name;
  std::string uuid;
  std::string storage;  // "file", "mem", "s3", "rados", "azure"
  std::string bucket;
  // Object-store credentials and settings (see StorageSpec). The secret key is stored so
  // that every client can mount without being given it; it is never printed (status,
  // dump and logs show "****"), and TIERFS_ACCESS_KEY / TIERFS_SECRET_KEY override both.
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  std::string ceph_conf;
  uint32_t block_size = 4 << 20;
  int version = kFormatVersion;
  int64_t created_ns = 0;
  // A client silent this long is dead; any live client then drops its locks and reclaims
  // its open-but-unlinked files. Clients send a heartbeat every fifth of it.
  int session_timeout_s = 60;
  // Removed files and directories stay this many days in `.trash` (meta_trash.cc); 0: they
  // are removed at once. `tierfs format` makes 1; a record written before trash existed
  // reads as 0.
  int trash_days = 0;
  // The change log (change_log.h) keeps records this many hours; 0: no change log.
  int changelog_hours = 0;
  // Members of a cache group sign their requests with it (group/wire.h). Made on first use
  // (Meta::GroupSecret); never printed.
  std::string group_secret;
  // A mirror volume (mirror/replicator.h): the primary's META-URL, without its password.
  // Clients open a mirror read-only; only its replicator writes the namespace.
  std::string mirror_of;
  // A mirror with an object store of its own (`tierfs mirror --storage`): the primary's
  // store, where its replicator copies blocks from and its clients read a block from when
  // the mirror's store lacks it (read-through, checksums verified). Empty: the mirror
  // shares the primary's store (or the volume is no mirror). source_secret_key and
  // source_session_token are never printed, like secret_key.
  std::string source_storage, source_bucket, source_access_key, source_secret_key, source_session_token,
      source_ceph_conf;

  std::string ToJson() const;
  static Result<FormatRecord> FromJson(const std::string& json);
  // The store settings this record describes.
  StorageSpec Spec() const;
  // The primary's store of a mirror with a store of its own (source_storage not empty).
  StorageSpec SourceSpec() const;
  // A copy with the secret key and session token replaced by "****" (when set).
  FormatRecord Redacted() const;
};

struct SessionInfo {
  uint64_t sid = 0;
  std::string host;
  uint32_t pid = 0;
  std::string mountpoint;
  std::string version;
  int64_t started_ns = 0;
  int64_t heartbeat_ns = 0;
  // Cache-group membership (mount --cache-group, tierfs cache-server); empty group: none.
  std::string cache_group;
  std::string group_addr;       // HOST:PORT it serves blocks on; empty with --no-sharing
  uint64_t group_capacity = 0;  // bytes of cache it offers (the ring weight)
  uint64_t group_used = 0;      // bytes cached, as of its last heartbeat
  uint64_t staged_bytes = 0;    // write-back: bytes staged and not yet uploaded (refreshed while mounted)
  // A client whose session another client ended (Meta::SessionLoss) registers anew and says
  // so here: the session it lost, when it found out, and what it lost with it.
  uint64_t resumed_from = 0;
  int64_t lost_ns = 0;
  uint64_t lost_files = 0;  // open files unlinked earlier: their data may be gone (EIO)
  uint64_t lost_locks = 0;  // open files that held locks (EIO from then on)
};

// What is left of a session another client ended because its heartbeats stopped
// (`SP` key): kept a day for `tierfs status` and for the client itself, should it wake up.
struct PurgedSession {
  SessionInfo info;  // as it was; heartbeat_ns: its last heartbeat
  int64_t purged_ns = 0;
  uint64_t purged_by = 0;  // the session that ended it (0: an offline tool such as gc)
  std::string purged_by_host;
  bool done = false;  // its locks, open-unlinked files and usage shares are cleaned up
};

// This client's session was ended by another client (its heartbeats had stopped for longer
// than the session timeout) and it registered a new one (Meta::SetSessionLossHandler).
struct SessionLoss {
  uint64_t old_sid = 0, new_sid = 0;
  int64_t found_ns = 0;      // when this client found out
  int64_t last_beat_ns = 0;  // the last heartbeat of the old session that committed
  std::string purged_by;     // "host (session N)", when the other client left a record
  std::set<Ino> sustained;   // inodes unlinked while open here: the purge freed them
};

struct StatFs {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t inodes = 0;
  uint64_t max_inodes = 0;  // 0: no limit
  // capacity_bytes is a limit (the volume's --capacity or a directory quota), not
  // kVolumeCapacity: what the object store has room for does not matter then.
  bool capacity_limited = false;
  // Bytes the store has room for, when less than capacity - used (a bucket directory on a
  // disk that holds other data too); nullopt: capacity - used.
  std::optional<uint64_t> available_bytes;
};

// What a volume may hold (statfs, and what fallocate may reserve) until volumes get a
// capacity setting: 1 PiB.
constexpr uint64_t kVolumeCapacity = 1ull << 50;

// Setattr fields (bit set of what to change).
enum SetAttrMask : uint32_t {
  kSetMode = 1 << 0,
  kSetUid = 1 << 1,
  kSetGid = 1 << 2,
  kSetSize = 1 << 3,
  kSetAtime = 1 << 4,
  kSetMtime = 1 << 5,
  kSetAtimeNow = 1 << 6,
  kSetMtimeNow = 1 << 7,
  kSetCtime = 1 << 8,
};

// The kernel's __FMODE_EXEC open flag: set in the flags of the open execve(2) makes.
constexpr int kOpenForExec = 0x20;

// Rename flags, as renameat2.
constexpr uint32_t kRenameNoReplace = 1;
constexpr uint32_t kRenameExchange = 2;
// Leaves a whiteout (a character device 0:0, as overlayfs wants) at the source name.
constexpr uint32_t kRenameWhiteout = 4;

struct MetaOptions {
  // 0: from the volume's format record (session_timeout_s, heartbeat a fifth of it).
  int64_t heartbeat_ns = 0;
  int64_t session_timeout_ns = 0;
  bool read_only = false;
  // Directory attributes this client just committed (a create, unlink, rename... in it)
  // answer GetAttr for this long without a transaction: the kernel asks for them right after
  // each such change. 0 turns it off. Mounts use their attribute-cache timeout, which is
  // the staleness the kernel's own cache already allows.
  int64_t dir_attr_cache_ns = 0;
  // The engine given logs the changes itself (a mirror's client writing through its
  // primary, mirror/forward_writes.h): Open does not wrap it in the change log even when
  // the format record asks for one.
  bool engine_logs_changes = false;
};

// A rename that publishes an object (gateway): what must hold of the destination, checked in
// the rename's transaction, and xattrs set on the moved inode in it.
struct RenameCondition {
  bool dst_absent = false;  // the destination name must not exist (If-None-Match: *)
  Ino dst_ino = 0;          // else, when set: it must still be this inode, with this seq (If-Match)
  uint64_t dst_seq = 0;
  std::vector<std::pair<std::string, std::string>> set_xattrs;
  // A replaced destination is deleted even when the trash is on (the S3 gateway's own
  // multipart parts: a part sent again is no user's removal, nothing to recover).
  bool no_trash = false;
};
// When a read updates a file's access time (mount -o relatime, the default; strictatime;
// noatime).
enum class AtimeMode { kRelatime, kStrict, kNone };
// Whether a read at read_ns updates an atime under mode: strictatime whenever the time moved
// on; relatime when the atime is not after the mtime or ctime, or a day old (meta_atime.cc).
bool AtimeDue(AtimeMode mode, int64_t atime_ns, int64_t mtime_ns, int64_t ctime_ns, int64_t read_ns);

// Called by background work to delete a slice's blocks from object storage.
using DeleteSliceFn = std::function<Status(uint64_t id, uint32_t size)>;
// Called by background work to delete a dead pack object (chunk/block_key.h PackKey).
using DeletePackFn = std::function<Status(uint64_t pack, uint32_t len)>;

// A slice inside a pack object: bytes [off, off+size) of the pack.
struct PackedSlice {
  uint64_t id = 0;
  uint32_t off = 0;
  uint32_t size = 0;
};

class Meta {
 public:
  // Opens a formatted volume. Fails with ENOENT "... holds no TierFS volume" when the engine
  // has no format record.
  static Result<std::unique_ptr<Meta>> Open(std::unique_ptr<KvEngine> engine, MetaOptions opts = {});
  // Writes the format record and the root directory. Refuses (EEXIST) when a volume exists,
  // unless force, which first erases all metadata.
  static Status Format(KvEngine* engine, const FormatRecord& rec, bool force);
  // Changes the format record of an existing volume in one transaction: edit receives the
  // current record and may change it (`tierfs config`). The name, uuid, block size and
  // format version are fixed for the life of a volume; edit must not change them.
  static Result<FormatRecord> UpdateFormat(KvEngine* engine, const std::function<Status(FormatRecord&)>& edit);
  // The format record, without opening the volume; ENOENT when the engine holds none.
  static Result<FormatRecord> ReadFormat(KvEngine* engine);
  ~Meta();

  const FormatRecord& format() const { return format_; }
  KvEngine* engine() { return engine_.get(); }

  // ---- sessions and background work ----
  // EBUSY once a destroy has begun (MarkDestroying).
  Status NewSession(SessionInfo info);
  // `tierfs destroy` marks the volume before it looks for live sessions: a session that
  // starts after the mark is refused, one that started before is seen by the look (both are
  // transactions on the mark). on=false takes the mark back (the destroy was refused).
  Status MarkDestroying(bool on);
  uint64_t sid() const { return sid_.load(); }
  Status CloseSession();
  Result<std::vector<SessionInfo>> ListSessions();
  // Sessions ended by other clients in the last day (newest first).
  Result<std::vector<PurgedSession>> ListPurgedSessions();

  // ---- liveness of this client's session (fencing) ----
  // The heartbeat has a thread of its own (StartBackground), so that no cleanup, trash
  // expiry, compaction or backup can delay it. Another client ends this session only after
  // seeing no heartbeat for the session timeout, and only in a transaction that reads the
  // heartbeat again and removes the session record first; the heartbeat transaction reads
  // that record, so each of the two sees the other or comes first.
  //
  // The lease: for half the session timeout after the start of its last heartbeat that
  // committed, this client knows that nobody can have ended its session (clocks between
  // hosts agreeing within that margin), and writes records that name its session (locks,
  // usage shares, open-unlinked and staged marks) without looking. Past that, every such
  // transaction also reads the session record and fails with EIO when it is gone, so a
  // client that was silent (stopped, partitioned, starved) never writes records that the
  // purge has already swept, whatever its heartbeat thread is doing.
  bool LeaseFresh() const;
  // When the lease is not fresh: beats now (at most once a second across callers); if the
  // session turns out to be gone, the loss is handled (below) before this returns.
  Status CheckSession();
  // Called on the thread that found this client's session gone, after a new session was
  // registered (new opens, locks and writes use it). The handler fences what the loss broke:
  // handles of files that held locks and of the open-unlinked files (whose data the purge
  // may have deleted) must fail with EIO from then on. nullptr: none.
  void SetSessionLossHandler(std::function<void(const SessionLoss&)> fn);
  // How many times this client lost its session.
  uint64_t session_losses() const { return session_losses_.load(); }
  // The volume's cache-group secret, made (32 random bytes, hex) and stored the first time
  // it is asked for.
  static Result<std::string> GroupSecret(KvEngine* engine);
  // Edits this client's session record in one transaction (its cache-group fields change
  // while mounted). ENOENT when the session was ended by another client (the heartbeat then
  // registers a new one, which keeps the edit).
  Status UpdateSession(const std::function<void(SessionInfo&)>& edit);
  void StartBackground(DeleteSliceFn delete_slice);
  void StopBackground();
  // Runs one round of background work now (tests, `gc`). A round deletes at most 1000
  // unlinked files and 1000 unreferenced slices, and stops deleting blocks after
  // kCleanupRoundNs (a slow store makes rounds shorter, not longer).
  Status RunCleanupOnce();
  static constexpr int64_t kCleanupRoundNs = 10'000'000'000;
  // Whether unlinked files or truncations still await the cleaner (gc runs rounds until not).
  Result<bool> HasPendingFiles();
  // Metadata backups (tools/meta_backup.h): true when the last backup of any client is at
  // least interval_ns old and no other live client is taking one; this session then has
  // the turn for up to an hour, until BackupDone (ok: the backup was written).
  Result<bool> ClaimBackup(int64_t interval_ns);
  Status BackupDone(bool ok);
  // Sets how unreferenced slices are deleted without starting the background thread (gc).
  void SetSliceDeleter(DeleteSliceFn delete_slice) { delete_slice_ = std::move(delete_slice); }
  // How dead pack objects are deleted (background work and gc); set before StartBackground.
  void SetPackDeleter(DeletePackFn delete_pack) { delete_pack_ = std::move(delete_pack); }
  // Calls fn for every slice a chunk record refers to (once per record), scanning the whole
  // namespace in batches of read transactions; for gc and fsck. Records that cannot be
  // decoded are added to *damaged when given (gc must not delete what they may refer to).
  Status ForEachSliceRef(const std::function<void(uint64_t id, uint32_t size)>& fn,
                         std::vector<DamagedRecord>* damaged = nullptr);
  // Calls fn for every inode with attributes, in inode order (batched read transactions);
  // attributes that cannot be decoded go to *damaged when given.
  Status ForEachInode(const std::function<void(Ino ino, const Attr& attr)>& fn,
                      std::vector<DamagedRecord>* damaged = nullptr);
  // fsck repairs, each one transaction: set a link count; drop a directory entry.
  Status RepairLinkCount(Ino ino, uint32_t nlink);
  // Inodes unlinked while some session holds them open (still charged to the volume).
  Result<std::set<Ino>> SustainedInodes();
  // Sets the usage counters so that GetStatFs reports `bytes` and `inodes` (fsck --repair).
  Status RepairUsage(uint64_t bytes, uint64_t inodes);
  Status RepairRemoveEntry(Ino parent, const std::string& name);
  // Slices whose blocks await deletion ("X" records).
  Result<std::vector<std::pair<uint64_t, uint32_t>>> PendingSlices();
  struct PendingSlice {
    uint64_t id = 0;
    uint32_t size = 0;
    int64_t due_ns = 0;  // the blocks may go from then on (compaction sets it ahead: --compact-grace)
  };
  Result<std::vector<PendingSlice>> PendingSlicesDue();
  Result<StatFs> GetStatFs();
  // statfs of a path: the nearest directory quota with a limit at or above ino (a file:
  // its directory), else the volume (whose limits are the root's quota).
  Result<StatFs> GetStatFs(Ino ino);

  // The path of ino below root (meta_path.cc), for logs: "/a/b"; a prefix "<inode N>" when
  // the chain up is broken (an unlinked inode) or a name was not found. Finding a name
  // scans the parent's entries; hint, when given, may propose an inode's parent and name
  // (remembered from lookups), checked with one read of that entry instead.
  using PathHint = std::function<bool(Ino ino, Ino* parent, std::string* name)>;
  Result<std::string> PathOf(Ino ino, Ino root = kRootIno, const PathHint& hint = nullptr);

  // ---- quotas (quota_tx.h explains them; meta_quota.cc) ----
  // Sets the limits of a quota (nullopt: unchanged; 0: none), creating it when absent. A new
  // directory quota's usage is counted in the same transaction when the tree has at most
  // kQuotaCountInTxn inodes (then it is exact); a larger tree, and a new user or group
  // quota, are counted in batches first (*exact false: changes made meanwhile may be off;
  // `quota check --repair` recounts).
  Status SetQuota(QuotaKind kind, uint64_t id, std::optional<int64_t> max_bytes, std::optional<int64_t> max_inodes,
                  bool* exact = nullptr);
  Result<std::optional<Quota>> GetQuota(QuotaKind kind, uint64_t id);
  Result<std::vector<Quota>> ListQuotas();
  Status DeleteQuota(QuotaKind kind, uint64_t id);
  // Counts from the namespace what the quota's usage should be (batched reads). For a
  // directory quota it also points files with one link at the directory they are in (volumes
  // written before quotas left a renamed file's old directory there).
  Result<Quota> CountQuotaUsage(QuotaKind kind, uint64_t id);
  // Sets a quota's usage (`quota check --repair`).
  Status SetQuotaUsage(QuotaKind kind, uint64_t id, int64_t bytes, int64_t inodes);
  static constexpr uint64_t kQuotaCountInTxn = 20000;

  // ---- trash (meta_trash.cc) ----
  // The trash's hour directory for a time: "YYYY-MM-DD-HH" (UTC).
  static std::string TrashHourName(int64_t ns);
  // Entry names in an hour directory: "PARENT-INO-NAME" (NAME cut to fit 255 bytes).
  static bool ParseTrashName(const std::string& entry, Ino* parent, Ino* ino, std::string* name);
  // Deletes what the trash holds for longer than the retention (days; the volume's setting
  // when negative), as of now_ns: hour directories older than days*24h + 1h, batch by batch.
  Status ExpireTrash(int64_t now_ns, int days = -1);
  // Puts trash entry `entry` of hour directory `hour` back where it was; EEXIST when that
  // name is taken again, ENOENT when its directory is gone, EAGAIN when the directory is
  // itself in the trash (restore it first).
  Status RestoreFromTrash(const Ctx& ctx, const std::string& hour, const std::string& entry);
  // Whether removals now go to the trash (the volume's setting, refreshed in the background).
  bool TrashOn() const { return trash_days_.load() > 0; }
  struct TrashUsage {
    uint64_t bytes = 0, entries = 0, hours = 0;
    // When the oldest and the newest hour go (their start + the retention + an hour, as
    // ExpireTrash judges; the background checks every minute); 0 when the trash is empty.
    int64_t first_expiry_ns = 0, last_expiry_ns = 0;
  };
  Result<TrashUsage> GetTrashUsage();
  // Makes every committed change durable against a power loss (see KvEngine::Sync).
  Status Sync() { return engine_->Sync(); }

  // ---- namespace ----
  Result<Attr> GetAttr(Ino ino);
  Result<std::pair<Ino, Attr>> Lookup(const Ctx& ctx, Ino parent, const std::string& name);
  // Checks mask (R_OK|W_OK|X_OK) for ctx against the inode's mode, or its access ACL
  // when it has one.
  Status Access(const Ctx& ctx, Ino ino, int mask);
  // The same for attributes the caller already read; reads the ACL (a transaction of
  // its own) only when attr says the inode has one.
  Status CheckAccess(const Ctx& ctx, Ino ino, const Attr& attr, int mask);
  Result<Attr> SetAttr(const Ctx& ctx, Ino ino, uint32_t mask, const Attr& in);
  // Access times of files read at the given times (meta_atime.cc): each is set to its
  // read's time when AtimeDue says so for what the engine holds; batched transactions.
  Status TouchAtimes(const std::vector<std::pair<Ino, int64_t>>& reads, AtimeMode mode);
  // Regular files, fifos, sockets, devices. mode includes S_IFMT. ctx.umask is applied
  // here, unless the parent has a default ACL: then the new inode inherits it (acl.h)
  // and the umask is ignored. The same for Mkdir.
  Result<std::pair<Ino, Attr>> Mknod(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode,
                                     uint64_t rdev);
  Result<std::pair<Ino, Attr>> Mkdir(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode);
  // O_TMPFILE: a regular file in `parent` with no name, counted as open here; gone at its
  // last Release unless Link named it first (only when linkable: opened without O_EXCL).
  Result<std::pair<Ino, Attr>> Tmpfile(const Ctx& ctx, Ino parent, uint32_t mode, bool linkable);
  Result<std::pair<Ino, Attr>> Symlink(const Ctx& ctx, Ino parent, const std::string& name,
                                       const std::string& target);
  Result<std::string> Readlink(Ino ino);
  // With the trash on (format --trash-days), the last link goes to the trash unless
  // trash is false (undoing a failed clone).
  Status Unlink(const Ctx& ctx, Ino parent, const std::string& name, bool trash = true);
  Status Rmdir(const Ctx& ctx, Ino parent, const std::string& name, bool trash = true);
  // cond (the S3 gateway's conditional publish): checked in the rename's transaction,
  // EEXIST / ESTALE when it does not hold, and the xattrs set on the moved inode there.
  Status Rename(const Ctx& ctx, Ino parent, const std::string& name, Ino new_parent,
                const std::string& new_name, uint32_t flags, const RenameCondition* cond = nullptr);
  Result<Attr> Link(const Ctx& ctx, Ino ino, Ino new_parent, const std::string& new_name);
  // Every entry of the directory except "." and "..", in name order; attrs filled when plus.
  // A damaged entry (a name or value no entry may have) is left out, and an entry whose
  // inode's attributes are damaged comes without attributes (mode 0): they go to *damaged
  // when given (fsck), else to the log (once per key), so that one damaged record never
  // makes the whole directory unlistable.
  Result<std::vector<DirEntry>> Readdir(const Ctx& ctx, Ino ino, bool plus,
                                        std::vector<DamagedRecord>* damaged = nullptr);
  // Fills the attributes of n entries listed by Readdir, in one read transaction (an entry
  // removed meanwhile, or whose attributes are damaged, keeps mode 0; the damaged go to
  // *damaged when given, else to the log).
  Status FillAttrs(DirEntry* entries, size_t n, std::vector<DamagedRecord>* damaged = nullptr);
  // Up to `limit` entries whose names are at least `from` ("": from the first; after + '\0'
  // for the names after `after`), in name (byte) order, with attributes when plus and the
  // value of xattr `xattr` (when not empty) in DirEntry::xattr; *more (when given) says
  // whether more follow. One read transaction that costs the page, not the directory
  // (meta_listing.cc).
  Result<std::vector<DirEntry>> ReaddirPage(const Ctx& ctx, Ino ino, const std::string& from, size_t limit,
                                            bool plus, bool* more = nullptr, const std::string& xattr = "");
  // Lookup of many names at once (sync's incremental rounds): kLookupBatch items per read
  // transaction, items of one directory next to each other. An item gets ino 0 when its name,
  // or its directory, does not exist (or is no directory); a damaged entry, a name that is
  // not plain ("", ".", "..", the trash's) is an error.
  struct NameLookup {
    NameLookup() = default;
    NameLookup(Ino p, std::string n, Ino i = 0, const Attr& a = Attr()) : parent(p), name(std::move(n)), ino(i), attr(a) {}
    Ino parent = 0;
    std::string name;
    Ino ino = 0;  // out
    Attr attr;    // out
  };
  static constexpr size_t kLookupBatch = 512;
  Status LookupMany(const Ctx& ctx, NameLookup* items, size_t n);

  // `tierfs rmr`: removes what directory `dir` holds, depth first, many files per
  // transaction, until about `budget` entries are gone; dir itself stays (the caller
  // removes it). Each removal is checked as unlink and rmdir check it.
  struct RemoveProgress {
    uint64_t files = 0, dirs = 0;  // removed by this call
    bool done = false;             // dir is empty
  };
  // Removed entries go to the trash when it is on, unless trash is false.
  Result<RemoveProgress> RemoveContents(const Ctx& ctx, Ino dir, uint64_t budget, bool trash = true);

  // `tierfs clone`: a copy of file or tree `src` named `name` in `dst_parent` that shares
  // the source's slices (no data copied; later writes to either side do not show in the
  // other). Built under a hidden name in batches and renamed into place at the end, so it
  // appears complete or not at all; the copy reflects the source as each batch read it.
  // Hard links inside the tree become separate files. EEXIST when name exists, EINVAL for
  // a destination inside the source.
  struct CloneStats {
    uint64_t files = 0, dirs = 0;
  };
  Result<CloneStats> Clone(const Ctx& ctx, Ino src, Ino dst_parent, const std::string& name);

  // `tierfs summary` (meta_summary.cc): the totals of a file or tree, read from metadata in
  // batches (a read transaction per batch of entries), in steps: each SummaryStep visits
  // about `budget` entries and adds them to the walk, until done. A file with several links
  // counts once (as du counts it). A directory the caller may not read and search is
  // counted itself but not walked (unreadable).
  struct SummaryWalk {
    uint64_t bytes = 0;      // lengths of the regular files
    uint64_t allocated = 0;  // their bytes holding data (Attr::allocated: sparse files less)
    uint64_t files = 0;      // every inode but directories (regular files, symlinks, ...)
    uint64_t dirs = 0;       // directories, the top one included
    uint64_t unreadable = 0;
    bool done = false;
    // Where the walk is.
    bool started = false;
    std::vector<Ino> pending;  // directories not read yet
    Ino dir = 0;               // the directory being read (0: none)
    std::string after;         // its last entry read
    std::set<Ino> linked;      // files with several links counted so far
  };
  Status SummaryStep(const Ctx& ctx, Ino top, SummaryWalk* walk, uint64_t budget);

  // ---- extended attributes ----
  Result<std::string> GetXattr(const Ctx& ctx, Ino ino, const std::string& name);
  Status SetXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string& value, int flags);
  Result<std::vector<std::string>> ListXattr(const Ctx& ctx, Ino ino);
  Status RemoveXattr(const Ctx& ctx, Ino ino, const std::string& name);

  // ---- open files ----
  // Checks permissions for the open flags and counts the open, so that an unlinked file's
  // data stays until the last Release.
  // With first_chunk, a regular file's chunk 0 records come back from the same
  // transaction (a small file is then read without another metadata round trip).
  Result<Attr> Open(const Ctx& ctx, Ino ino, int flags, std::vector<SliceRecord>* first_chunk = nullptr);
  // Open with attributes the caller read recently (the client's open cache): the same
  // checks and count, no transaction. EAGAIN when judging the access needs the inode's ACL
  // (the caller then opens normally).
  Status OpenWithAttr(const Ctx& ctx, Ino ino, int flags, const Attr& a);
  // Counts an open of an inode this client just created (no permission check, no read).
  void OpenCreated(Ino ino);
  // The last Release of an inode unlinked while open here deletes it, unless
  // `kernel_holds`: the kernel of this mount still has a lookup of it (a process resolved
  // the name and is about to open it). The inode then stays, as an unlinked file, until
  // Forgotten or for kKernelHoldNs, whichever comes first: an open racing with the last
  // close and the removal gets the unlinked file, as on a local file system, instead of
  // ESTALE twice (the kernel retries only once). The time bound: a kernel that never
  // learnt of the removal (`rmr`, another client) keeps the inode cached and sends no
  // FORGET until it needs the memory; the race it covers lasts microseconds.
  Status Release(Ino ino, bool kernel_holds = false);
  // The kernel dropped its last lookup of `ino`: deletes it if Release kept it for that.
  Status Forgotten(Ino ino);
  static constexpr int64_t kKernelHoldNs = 2'000'000'000;

  // ---- file data layout ----
  Result<uint64_t> NewSliceId();
  // The chunk's records in commit order, with pending truncations applied as hole records.
  Result<std::vector<SliceRecord>> ReadChunk(Ino ino, uint32_t index);
  // Indexes of chunks that have records (for `info`).
  Result<std::vector<uint32_t>> ListChunks(Ino ino);
  // Commits a slice window to chunk `index` and grows the length to at least `min_length`.
  // Sets mtime/ctime to mtime_ns.
  // `out`, when given, receives the inode's attributes after the commit.
  // `staged`: the slice's blocks are staged for write-back by this client and not all in the
  // object store yet; a mark records that (and where) until ClearStaged.
  Status WriteSlice(Ino ino, uint32_t index, const SliceRecord& rec, uint64_t min_length, int64_t mtime_ns,
                    Attr* out = nullptr, bool staged = false);
  // Drops the staged marks of slices whose blocks are all in the object store now.
  Status ClearStaged(const std::vector<uint64_t>& ids);
  struct StagedMark {
    uint64_t sid = 0;
    std::string host;
    std::string dir;  // its staging area, when the session recorded it (RecordStagingArea)
    bool alive = false;  // the session still sends heartbeats
  };
  // The staged mark of slice id, if any.
  Result<std::optional<StagedMark>> StagedBy(uint64_t id);
  // ---- staging areas of write-back clients (meta_staging.cc) ----
  // Records where this session stages (its "SW" record: host, dir), so that what it leaves
  // staged can be found after it died; DropStagingArea forgets it (nothing left staged).
  Status RecordStagingArea(const std::string& dir);
  Status DropStagingArea();
  struct StagingArea {
    uint64_t sid = 0;
    std::string host, dir;  // empty when the session left no record (an older client)
    bool alive = false;     // the session still sends heartbeats
    uint64_t slices = 0;    // slices of it still marked staged ("W")
  };
  // Every session with a staging record or staged marks, in sid order.
  Result<std::vector<StagingArea>> StagingAreas();
  // Drops the records of dead sessions that have no staged mark left (after their blocks
  // were uploaded).
  Status PruneStagingAreas();
  // ---- small-file packing (meta_pack.cc) ----
  // Pack object `pack` (pack_len bytes) now holds `members`, slices committed while staged
  // (WriteSlice with staged and a kRecordMayBePacked record). In one transaction, every
  // member still committed (its staged mark is there) gets its location and loses its
  // staged mark; the others (deleted meanwhile, or never committed) are dead bytes of the
  // pack, and a pack with no member at all is dead at once. Returns the members recorded.
  Result<std::vector<uint64_t>> RecordPack(uint64_t pack, uint32_t pack_len, const std::vector<PackedSlice>& members);
  // Repacking: the members of old_pack that are still in it move to pack (at their new
  // offsets in `members`), in one transaction; returns how many. old_pack, once empty, is
  // deleted no earlier than release_after_ns (readers holding the old locations finish).
  Result<size_t> MovePackMembers(uint64_t old_pack, uint32_t old_len, uint64_t pack, uint32_t pack_len,
                                 const std::vector<PackedSlice>& members, int64_t release_after_ns);
  struct PackInfo {
    uint64_t pack = 0;
    uint32_t len = 0;   // the object's length
    uint64_t live = 0;  // bytes of live members
    std::vector<PackedSlice> members;
  };
  // Every pack with a live member (batched read transactions; gc, fsck).
  Result<std::vector<PackInfo>> ListPacks();
  // Dead packs whose objects await deletion ("PX").
  Result<std::vector<std::pair<uint64_t, uint32_t>>> PendingPacks();

  // ---- compaction (vfs/compactor.h) ----
  struct ChunkRecords {
    std::vector<SliceRecord> records;  // with their seqs, as stored (truncation masks not applied)
    bool masked = false;               // the inode has truncation masks not yet applied
    uint64_t length = 0;               // the file's length
  };
  Result<ChunkRecords> ReadChunkRecords(Ino ino, uint32_t index);
  // Replaces `old` (records of chunk index exactly as ReadChunkRecords returned them) with
  // `fresh` (at most as many; windows of new slices, or zero records) in one transaction,
  // if none of `old` changed, no record was committed between them, and no truncation mask
  // waits; records committed after them stay and keep shadowing the new ones. The slices of
  // `old` lose a reference; those left with none are deleted no earlier than
  // release_after_ns, so that readers holding the old map can finish. `staged`: new slices
  // whose blocks are staged for write-back here (marked as WriteSlice does). EAGAIN when
  // the chunk changed (the caller drops its new slices and may try again).
  Status SwapChunkRecords(Ino ino, uint32_t index, const std::vector<SliceRecord>& old,
                          std::vector<SliceRecord> fresh, int64_t release_after_ns,
                          const std::vector<uint64_t>& staged = {});

  // mode: FALLOC_FL_* bits.
  Status Fallocate(const Ctx& ctx, Ino ino, int mode, uint64_t off, uint64_t len);
  // Shares the slices of [off_in, off_in+len) into the output file; no data is copied.
  Result<uint64_t> CopyFileRange(const Ctx& ctx, Ino in, uint64_t off_in, Ino out, uint64_t off_out,
                                 uint64_t len);

  // ---- locks (owner: the lock owner from the kernel; sid scopes it to this client) ----
  // type: F_RDLCK, F_WRLCK or F_UNLCK. Returns EAGAIN on conflict.
  Status Flock(Ino ino, uint64_t owner, int type);
  struct LockRange {
    int type;
    uint64_t start, end;  // inclusive end; UINT64_MAX = to EOF
    uint32_t pid;
  };
  // Returns the first conflicting lock, or type F_UNLCK.
  Result<LockRange> GetLk(Ino ino, uint64_t owner, LockRange want);
  Status SetLk(Ino ino, uint64_t owner, LockRange want);
  // Drops every record lock of owner on ino (close(2) of any of the owner's descriptors).
  Status ReleaseRecordLocks(Ino ino, uint64_t owner);

  // Whether this client has the inode open (counted from Open to Release).
  bool IsOpen(Ino ino);

 private:
  Meta(std::unique_ptr<KvEngine> engine, MetaOptions opts, FormatRecord format);
  Result<Ino> NextInode();
  Result<uint64_t> NextId(const char* counter, uint64_t batch, uint64_t* next, uint64_t* end);
  // Usage accounting, in the transaction that changes usage: ChargedTxn runs fn and then
  // adds *bytes and *inodes (as fn left them; null: 0) to this thread's slot of the
  // session's counters (the volume's own counters without a session), in the same
  // transaction and without reading the slot: only this thread writes it.
  Status ChargedTxn(const int64_t* bytes, const int64_t* inodes, const std::function<Status(KvTxn&)>& fn);
  // Moves a session's shards into the volume's counters (its end, or its death).
  Status FoldUsage(uint64_t sid);
  // Inodes this client freed (their last link and open gone) in the last minute or so: an
  // open that read one while it was being freed must not succeed (Meta::Open).
  bool FreedHere(Ino ino);
  void NoteFreed(Ino ino);
  // Whether some session holds ino open while it has no name (its `SO` record).
  Result<bool> HeldOpenTx(KvTxn& t, Ino ino);
  Status CreateEntry(const Ctx& ctx, Ino parent, const std::string& name, Attr attr, const std::string* target,
                     std::pair<Ino, Attr>* out);
  // Drops one link of `ino` inside txn; frees or parks the inode when it was the last.
  Status DropLink(KvTxn& t, Ino ino, Attr* attr, int64_t now);
  // Ends session sid's hold on an inode removed while open there (its `SO` record) and
  // frees the inode if no name is left; *usage and *inodes get what to take off the
  // volume's counters.
  Status DropSustainedTx(KvTxn& t, uint64_t sid, Ino ino, int64_t* usage, int64_t* inodes);
  // The permission and mode checks of an open with the given flags.
  Status CheckOpen(const Ctx& ctx, const Attr& a, const acl::Acl* access, int flags);
  // Deletes the chunk records of unlinked files, several files per transaction; sets
  // `finished` to how many of inos (a prefix) are now gone entirely.
  Status DeleteFilesData(const std::vector<Ino>& inos, size_t* finished);
  Status ApplyTruncRule(Ino ino, uint64_t seq, bool* done);
  Status UnrefSlice(KvTxn& t, uint64_t id, uint32_t size);
  // meta_trash.cc: instead of dropping the last link of `ino` (named `name` in `parent`,
  // already removed from it by the caller; pa: the directory's attributes), moves it to the current hour directory of the
  // trash when the trash is on and the entry is not in the trash already; *moved tells.
  // spare: an inode number for the hour directory, should it not exist yet.
  Status TrashTx(KvTxn& t, Ino parent, const Attr& pa, const std::string& name, Ino ino, Attr* a, int64_t now, Ino spare,
                 bool* moved);
  // meta_clone.cc: copies one inode (not a directory's entries) for the caller ctx (who owns
  // the copy unless root); *usage gains its bytes, *copy receives the copy's attributes.
  Status CloneInodeTx(KvTxn& t, const Ctx& ctx, Ino src, const Attr& sa, Ino ino, Ino parent, const std::string& name,
                      int64_t now, int64_t* usage, Attr* copy);
  // Removes what session sid left: sustained inodes, locks, usage shares (its own clean end,
  // and the second step of ending a dead session, after EndDeadSession).
  Status PurgeSession(uint64_t sid);
  // Ends session sid if its heartbeat is still older than the timeout, in one transaction
  // that removes its records and leaves a `SP` record; *ended says whether it did.
  Status EndDeadSession(uint64_t sid, bool* ended);
  // In a transaction that writes records naming session sid: fails with EIO when the lease
  // is not fresh and the session is gone.
  Status SessionGuardTx(KvTxn& t, uint64_t sid);
  void HeartbeatLoop();
  // One heartbeat; *gone: the session record was not there.
  Status Beat(bool* gone);
  // Registers a new session after the old one was ended, and fences what it held.
  Status HandleSessionLoss(uint64_t old_sid);
  Status ChangeXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string* value, int flags);
  Status CleanDeadSessions();
  Status CleanPendingSlices();
  Status CleanPendingPacks();
  // Keeps in `due` only the released slices or packs no registered reader of the change
  // log still needs (release_hold_); key names each as the key of its cleanup record.
  Status HoldForReaders(std::vector<std::pair<uint64_t, uint32_t>>* due,
                        std::string (*key)(const std::pair<uint64_t, uint32_t>&));
  void BackgroundLoop();

  std::unique_ptr<KvEngine> engine_;
  MetaOptions opts_;
  FormatRecord format_;
  std::atomic<int> trash_days_{0};
  int64_t trash_checked_mono_ns_ = 0;  // background thread: when it last refreshed and expired
  uint64_t changelog_packed_to_ = 0;    // background thread: CompactChangeLog's resume
  std::atomic<uint64_t> sid_{0};
  // Monotonic time (CLOCK_BOOTTIME, so a suspended host counts the sleep) of the start of
  // the last heartbeat that committed (or of NewSession).
  std::atomic<int64_t> lease_start_ns_{0};
  std::atomic<int64_t> last_check_ns_{0};  // CheckSession's rate limit
  std::atomic<bool> session_gone_{false};  // a guard found it gone: beat now
  std::atomic<uint64_t> session_losses_{0};
  std::mutex beat_mu_;                     // one Beat (and loss handling) at a time
  std::mutex session_mu_;
  SessionInfo session_info_;               // as registered and edited; guarded by session_mu_
  std::function<void(const SessionLoss&)> loss_fn_;  // guarded by session_mu_
  struct UsageSlot {
    int64_t bytes = 0, inodes = 0;
  };
  std::mutex usage_mu_;
  std::map<uint32_t, UsageSlot> usage_slots_;  // this session's slots as committed; guarded by usage_mu_
  uint64_t usage_sid_ = 0;                     // the session usage_slots_ belong to; guarded by usage_mu_

  std::mutex id_mu_;
  uint64_t next_ino_ = 0, end_ino_ = 0, next_slice_ = 0, end_slice_ = 0;


  std::mutex open_mu_;
  std::map<Ino, int> open_count_;
  std::set<Ino> sustained_;  // unlinked while open here: delete at the last Release
  std::map<Ino, int64_t> kernel_held_;  // sustained, closed, kept (see Release): since when
  void DropKernelHeld();  // those held kKernelHoldNs (the background loop, every second)
  std::map<Ino, int64_t> freed_;  // FreedHere: inode -> when (monotonic ns)

  void RememberDir(Ino ino, const Attr& a);
  void ForgetDir(Ino ino);
  struct CachedDir {
    Attr attr;
    int64_t expires_mono_ns;
  };
  std::mutex dir_cache_mu_;
  std::map<Ino, CachedDir> dir_cache_;
  // Inodes this client created and has set no xattr on, with the monotonic time until which
  // that may be assumed (the same window as dir_cache_). The kernel asks for
  // security.capability before the first write to every file; for a file just created here
  // the answer is known without a transaction. Guarded by dir_cache_mu_.
  std::map<Ino, int64_t> fresh_without_xattrs_;
  bool KnownWithoutXattrs(Ino ino);
  // Inodes whose attributes this client last read from the engine without an ACL flag,
  // with the monotonic time until which (the same window) a getxattr of an ACL may answer
  // "none" without a transaction. With kernel ACL checks the kernel asks for
  // system.posix_acl_access of every inode a non-owner uses, right after it looked the
  // inode up or refreshed its attributes: this spares that round trip. Directories in
  // dir_cache_ are known from there. Guarded by dir_cache_mu_ (meta_acl.cc).
  std::map<Ino, int64_t> seen_without_acl_;
  void NoteAclFlags(Ino ino, const Attr& a);
  void NoteAclFlags(const DirEntry* entries, size_t n);  // one lock for all
  bool KnownWithoutAcl(Ino ino);

  DeleteSliceFn delete_slice_;
  DeletePackFn delete_pack_;
  // Holds back deleting the blocks and packs of released data until every registered
  // reader of the change log (a mirror) applied the commit that released them.
  std::unique_ptr<ReleaseHold> release_hold_;
  std::thread bg_;
  std::thread hb_;
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;
};

}  // namespace tierfs
