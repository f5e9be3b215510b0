// The file system's logic between FUSE and the metadata/data layers: open handles, a
// reader per handle, a writer per open inode, directory snapshots, locks and the internal
// "tierfs.info" xattr. The FUSE adapter only translates requests to these calls.
//
// Threads: every method may be called from any FUSE worker thread concurrently.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "meta/meta.h"
#include "meta/types.h"
#include "vfs/compactor.h"

namespace tierfs {

class CachedStore;
struct ChunkSegment;
class InodeState;
class ReadPieces;
struct Handle;

struct VfsOptions {
  int64_t flush_age_ns = 5'000'000'000;  // commit buffered writes at least this often
  bool read_only = false;
  // The open cache (`mount --open-cache`): a read-only open of a file whose attributes this
  // client read less than this long ago uses them instead of asking the engine, keeping the
  // file's slice maps too. This client's own changes drop them; other clients' changes
  // show after at most this long (as with the kernel's attribute cache). 0: off.
  int64_t open_cache_ns = 0;
  // The cache group's state as a JSON object, shown as "group" in tierfs.stats; unset
  // without a group.
  std::function<std::string()> group_stats;
  // The process's metrics as flat JSON (metrics::Registry::SnapshotJson), shown as
  // "metrics" in tierfs.stats for `tierfs stats`; and where they are served ("" none).
  std::function<std::string()> metrics_stats;
  std::string metrics_addr;
  // When to compact fragmented chunks (vfs/compactor.h).
  CompactorOptions compactor;
  // When reads update files' access times (mount -o relatime / strictatime / noatime;
  // vfs_atime.cc).
  AtimeMode atime = AtimeMode::kRelatime;
  // The mount's root (`mount --subdir`): its ".." is itself, and the root-only control
  // xattrs (tierfs.stats, tierfs.pid) are on it.
  Ino root = kRootIno;
};

struct Entry {
  Ino ino = 0;
  Attr attr;
};

struct OpenResult {
  uint64_t fh = 0;
  bool keep_cache = false;
  // The open set the file's access time (vfs_atime.cc): the kernel's cached attributes
  // must go, or stat shows the old one until they expire.
  bool atime_marked = false;
};

class Vfs {
 public:
  Vfs(Meta* meta, CachedStore* store, VfsOptions opts);
  ~Vfs();

  Meta* meta() { return meta_; }

  Result<Entry> Lookup(const Ctx& ctx, Ino parent, const std::string& name);
  Result<Attr> GetAttr(Ino ino);
  // fh != 0 when the change comes through an open file (ftruncate): no path permission check.
  Result<Attr> SetAttr(const Ctx& ctx, Ino ino, uint32_t mask, const Attr& in, uint64_t fh);
  Result<Entry> Mknod(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode, uint64_t rdev);
  Result<Entry> Mkdir(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode);
  Result<Entry> Symlink(const Ctx& ctx, Ino parent, const std::string& name, const std::string& target);
  Result<std::string> Readlink(Ino ino);
  Status Unlink(const Ctx& ctx, Ino parent, const std::string& name);
  Status Rmdir(const Ctx& ctx, Ino parent, const std::string& name);
  Status Rename(const Ctx& ctx, Ino parent, const std::string& name, Ino new_parent, const std::string& new_name,
                uint32_t flags);
  Result<Entry> Link(const Ctx& ctx, Ino ino, Ino new_parent, const std::string& new_name);
  Status Access(const Ctx& ctx, Ino ino, int mask);
  // The kernel holds a lookup of regular file `ino` (an entry reply it accepted). The
  // count it keeps is the one FORGET hands back: while it is above zero, the last close
  // of the file after its removal keeps it (Meta::Release) for an open the kernel is
  // about to send.
  void NoteKernelLookup(Ino ino);
  // The kernel dropped `nlookup` lookups of the inode (all of them: FORGET comes at its
  // eviction): forget its client state unless it is open or dirty.
  void Forget(Ino ino, uint64_t nlookup = 0);
  // How many closed files without a kernel lookup keep their state (ParkIdle), at most.
  static constexpr size_t kIdleStates = 16384;
  // Inodes this client holds state for (open, dirty, held by the kernel, or idle).
  size_t inode_states();

  Result<std::pair<Entry, OpenResult>> Create(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode,
                                              int flags);
  Result<OpenResult> Open(const Ctx& ctx, Ino ino, int flags);
  // open(2) with O_TMPFILE in directory `parent`: a new, unnamed, open file.
  Result<std::pair<Entry, OpenResult>> Tmpfile(const Ctx& ctx, Ino parent, uint32_t mode, int flags);
  // Commits the inode's buffered writes first (read-your-writes), clips the range to the
  // length, and reads through the handle's FileReader (file_reader.h); with `pieces` the
  // bytes are described by windows of cached blocks and of buf (FileReader::Read).
  Result<size_t> Read(uint64_t fh, uint64_t off, size_t size, char* buf, ReadPieces* pieces = nullptr);
  Status Write(uint64_t fh, uint64_t off, const char* data, size_t size);
  // close(2) of one file descriptor: commits buffered data, drops the owner's record locks.
  Status Flush(uint64_t fh, uint64_t lock_owner);
  // fsync(2): commits the file's buffered data, then makes its objects and the metadata
  // durable against a power loss, in that order.
  Status Fsync(uint64_t fh);
  // fsync(2) of a directory: every metadata change is committed before it is answered,
  // so only durability remains.
  Status FsyncDir();
  // The last close of an open file description: commits, and drops its flock.
  Status Release(uint64_t fh);
  Status Fallocate(const Ctx& ctx, uint64_t fh, int mode, uint64_t off, uint64_t len);
  // SEEK_DATA / SEEK_HOLE: the next offset at or after `off` that holds data or is a hole
  // (the end of the file counts as one); ENXIO at or past the end, or when no data follows.
  Result<uint64_t> Lseek(uint64_t fh, uint64_t off, int whence);
  Result<uint64_t> CopyFileRange(const Ctx& ctx, uint64_t fh_in, uint64_t off_in, uint64_t fh_out, uint64_t off_out,
                                 uint64_t len);

  Result<uint64_t> Opendir(const Ctx& ctx, Ino ino);
  // Takes one entry of a listing and the offset of the entry after it; false when the
  // reply is full (the entry is not taken: the next Readdir starts with it).
  using DirFiller = std::function<bool(const DirEntry& e, uint64_t next_off)>;
  // Lists the directory snapshot ("." and ".." first) from offset `off` on, until fill
  // refuses an entry or the snapshot ends (vfs_dir.cc). The snapshot is taken at offset 0
  // and its offsets are stable for the life of the handle; a whole listing visits each
  // entry about once. With plus, entries carry their attributes.
  Status Readdir(const Ctx& ctx, uint64_t fh, uint64_t off, bool plus, const DirFiller& fill);
  Status Releasedir(uint64_t fh);

  // statfs of a path: its nearest capacity limit (Meta::GetStatFs), else the room of the
  // object store when it knows it (ObjectStore::Space), else kVolumeCapacity.
  Result<StatFs> GetStatFs(Ino ino = kRootIno);

  Result<std::string> GetXattr(const Ctx& ctx, Ino ino, const std::string& name);
  Status SetXattr(const Ctx& ctx, Ino ino, const std::string& name, const std::string& value, int flags);
  Result<std::vector<std::string>> ListXattr(const Ctx& ctx, Ino ino);
  Status RemoveXattr(const Ctx& ctx, Ino ino, const std::string& name);

  // op: LOCK_SH, LOCK_EX or LOCK_UN (no LOCK_NB: the caller loops for blocking locks).
  // The lock belongs to the handle (the open file description), as flock(2) wants.
  // Taking a lock revalidates the file: *changed (when given) says whether it holds data
  // changes this client had not seen, for which the kernel must drop its cached pages.
  Status Flock(uint64_t fh, int op, bool* changed = nullptr);
  Result<Meta::LockRange> GetLk(uint64_t fh, uint64_t owner, Meta::LockRange want);
  Status SetLk(uint64_t fh, uint64_t owner, Meta::LockRange want, bool* changed = nullptr);

  // The cache controls (vfs_cache.cc): the virtual xattrs below, answered as JSON.
  static constexpr const char* kCacheXattr = "tierfs.cache";
  static constexpr const char* kWarmupXattr = "tierfs.warmup";
  // Warm-up into the cache group: each block into its owner's cache.
  static constexpr const char* kWarmupGroupXattr = "tierfs.warmup.group";
  static constexpr const char* kEvictXattr = "tierfs.evict";
  static constexpr const char* kStatsXattr = "tierfs.stats";
  // On a file: compacts every chunk that gains from it (`tierfs compact`); answers the stats.
  static constexpr const char* kCompactXattr = "tierfs.compact";
  // `tierfs rmr DIR`: each read of the xattr on DIR removes about kRmrBudget entries under
  // it (Meta::RemoveContents) and answers {"files", "dirs", "done"}.
  static constexpr const char* kRmrXattr = "tierfs.rmr";
  static constexpr uint64_t kRmrBudget = 20000;
  // `tierfs clone SRC DST`: setting it on SRC to {"parent": INO, "name": NAME} (INO as the
  // kernel numbers it: 1 is the mount's root) clones SRC there (Meta::Clone).
  static constexpr const char* kCloneXattr = "tierfs.clone";
  static bool CloneTarget(const std::string& value, uint64_t* parent, std::string* name);
  // `tierfs summary PATH` (vfs_summary.cc): reading "tierfs.summary" on PATH starts a walk
  // of its tree from metadata (Meta::SummaryStep, about kSummaryBudget entries per read) and
  // reading "tierfs.summary.TOKEN" goes on with it; each answers the totals so far as
  // {"token", "bytes", "allocated", "files", "dirs", "unreadable", "done"}. A walk unread for
  // a minute is dropped.
  static constexpr const char* kSummaryXattr = "tierfs.summary";
  static constexpr uint64_t kSummaryBudget = 20000;
  static bool IsSummaryXattr(const std::string& name);
  Result<std::string> Summary(const Ctx& ctx, Ino ino, const std::string& name);
  static bool IsCacheXattr(const std::string& name);
  Result<std::string> CacheXattr(const Ctx& ctx, Ino ino, const std::string& name);
  Result<std::string> Compact(Ino ino);
  std::string StatsJson();
  // An answer of CacheXattr that did not reach the caller (its buffer was too small):
  // the next read of the same xattr returns it instead of acting again.
  void KeepCacheAnswer(Ino ino, const std::string& name, std::string answer);

  // The layout of a file as JSON (the "tierfs.info" xattr and `tierfs info`). With
  // page_bytes > 0, one page of it ("tierfs.info@FROM"): the slices from the file's
  // FROM-th on (counted over its chunks in order) that fit in about page_bytes, and
  // "page": {"next": N (absent on the last page), "ctime_ns": ...} so that the reader can
  // ask for the rest and tell whether the file changed between pages.
  Result<std::string> LayoutJson(Ino ino, uint64_t from = 0, size_t page_bytes = 0);
  // Opens served by the open cache (stats, tests).
  uint64_t cached_opens() const { return cached_opens_.load(); }
  // Commits every buffered write (unmount).
  Status FlushAll();
  // This client's session was ended by another client (Meta::SessionLoss): its locks are
  // gone and the files it held open after their unlink may be freed. Handles that held a
  // lock, and handles of those files, are fenced: their buffered writes are dropped and
  // every further read, write, fsync, lock or close fails with EIO (as an NFS client does
  // after losing its lock state), never returning zeros or writing under a lock another
  // client may now hold. Other handles go on, in the new session.
  void OnSessionLost(const SessionLoss& loss);
  // Drops the kernel's cached pages of an inode (set by the FUSE adapter; nullptr: none).
  void SetPageInvalidator(std::function<void(Ino)> fn);
  // Handles fenced so far (tests, tierfs.stats).
  uint64_t fenced_handles() const { return fenced_handles_.load(); }

  // FUSE passthrough (vfs_passthrough.cc): whole-file copies (chunk/flat_files.h) of files
  // of at least min_size bytes whose blocks are all in the disk cache. Call before serving.
  void EnableFlatCopies(std::unique_ptr<class FlatFiles> flat, uint64_t min_size);
  class FlatFiles* flat_files() { return flat_.get(); }
  struct FlatCopy {
    std::string name;  // empty: the file does not qualify (see PassthroughCopy)
    std::string path;  // empty: no verified copy yet
  };
  // For handle fh, just opened read-only: the copy of the file's content as this open sees
  // it (its name is the fingerprint of the length and slice maps the open refreshed), and
  // its path once built and verified. A file qualifies when it is regular, at least
  // min_size long, with no buffered writes here and every block in the disk cache; a copy
  // of a qualifying file is queued when missing.
  FlatCopy PassthroughCopy(uint64_t fh);

 private:
  // Opens with attributes read from the engine while the state's generation was `gen`;
  // first_chunk: the map of chunk 0 read with them, kept for the reads to come.
  Result<OpenResult> OpenWithAttr(const std::shared_ptr<InodeState>& st, const Attr& a, int flags, uint64_t gen,
                                  std::vector<ChunkSegment>* first_chunk = nullptr);
  // Open, also giving the attributes the file was opened with (after O_TRUNC).
  Result<OpenResult> OpenInode(const Ctx& ctx, Ino ino, int flags, Attr* attr_out);
  std::shared_ptr<InodeState> State(Ino ino);
  std::shared_ptr<Handle> GetHandle(uint64_t fh);
  // The handle for a data operation: EBADF when unknown; EIO when fenced, after making
  // sure (Meta::CheckSession) that a session loss this client has not noticed yet is
  // handled first.
  Result<std::shared_ptr<Handle>> UsableHandle(uint64_t fh);
  uint64_t AddHandle(std::shared_ptr<Handle> h);
  Status FlushInode(InodeState& st);
  // Files closed with no kernel lookup left: their state joins idle_, and the oldest beyond
  // the bound are dropped unless open again or holding uncommitted writes.
  void ParkIdle(Ino ino);
  // The inode's writer, made on first use; its commits drop what the state caches.
  std::shared_ptr<class FileWriter> Writer(InodeState& st);
  Status BeforeUnlock(Handle& h);
  Status AfterLock(Handle& h, bool* changed);
  Attr MergePending(Ino ino, Attr a);
  void FlusherLoop();
  // vfs_atime.cc: marks the inode's access time for a read now (by opts_.atime), and
  // writes the marks (the flusher, every half second, and at unmount).
  bool NoteAccess(const std::shared_ptr<InodeState>& st);  // true: marked
  Status FlushAtimes();
  void ForgetXattrCache(Ino ino);
  // Drops the open cache's attributes of the inode (after a change of its mode, owner or ACL).
  void ForgetOpenCache(Ino ino);
  // After a compaction swapped an inode's records: drops this client's cached maps of it.
  void DropMaps(Ino ino);
  // The object key and length of every block the file's visible data is in.
  Result<std::vector<std::pair<std::string, uint32_t>>> FileBlocks(Ino ino);

  Meta* meta_;
  CachedStore* store_;
  VfsOptions opts_;

  std::mutex mu_;  // guards inodes_ and handles_
  std::mutex kernel_mu_;  // guards kernel_lookups_; taken before Meta's locks
  std::unordered_map<Ino, uint64_t> kernel_lookups_;  // NoteKernelLookup, regular files only
  std::map<Ino, std::shared_ptr<InodeState>> inodes_;
  // Inodes closed by their last handle that no kernel lookup holds (every inode when the
  // library runs without a mount: sync, the gateway), most recently closed first. Nothing
  // else ever drops their state, so without this bound a process that opens millions of
  // files once (a sync of a large tree) grows by ~500 bytes per file for good. Guarded
  // by mu_. ParkIdle keeps at most kIdleStates of them (~8 MiB, layout caches aside).
  std::list<Ino> idle_;
  std::unordered_map<Ino, std::list<Ino>::iterator> idle_pos_;
  std::map<uint64_t, std::shared_ptr<Handle>> handles_;
  std::map<Ino, std::weak_ptr<InodeState>> dirty_;  // inodes written since their last commit
  uint64_t next_fh_ = 1;

  std::atomic<uint64_t> cached_opens_{0};
  std::atomic<uint64_t> fenced_handles_{0};
  std::mutex invalidator_mu_;
  std::function<void(Ino)> invalidate_pages_;  // guarded by invalidator_mu_
  std::mutex cache_ops_mu_;  // recent answers of the acting cache xattrs (vfs_cache.cc)
  std::map<std::pair<Ino, std::string>, std::pair<int64_t, std::string>> cache_ops_;
  std::mutex summaries_mu_;  // the walks of `tierfs summary`, by token
  std::map<uint64_t, std::shared_ptr<struct SummaryState>> summaries_;

  // Rewrites fragmented chunks (null when read-only). Destroyed first: its thread calls
  // back into the inode states.
  std::unique_ptr<class Compactor> compactor_;

  std::mutex atime_mu_;  // guards atime_queue_
  std::vector<std::shared_ptr<InodeState>> atime_queue_;  // inodes with an access time to write

  std::unique_ptr<class FlatFiles> flat_;  // null: no passthrough copies
  uint64_t flat_min_size_ = 0;

  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stopping_ = false;
};

}  // namespace tierfs
