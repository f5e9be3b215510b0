// CachedStore: slices on top of an ObjectStore, with the block cache hierarchy (memory, then
// local disk: chunk/block_cache.h, chunk/disk_cache.h), single-flight block fetches,
// prefetch, and bounded asynchronous block uploads with backpressure.
//
// A block read looks in memory, then on disk, then among the blocks staged for write-back,
// then in the object store; a block fetched from the store is written to the disk cache in
// the background. With write-back (StartWriteback) an "upload" stages the block locally
// and the real upload follows in the background (chunk/writeback.h). Uploaded blocks of small files
// (shorter than a block; all blocks with cache_writes_to_disk) enter the disk cache too.
//
// Threads: any thread may call any method concurrently. No lock is held while the object
// store is called. Every SliceWriter created by NewSliceWriter must be destroyed before the
// CachedStore.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chunk/block_cache.h"
#include "chunk/disk_cache.h"
#include "common/buffer_pool.h"
#include "common/status.h"
#include "object/object_store.h"

namespace tierfs {

class PeerSource;
class ReadPieces;
class SliceWriter;
class ThreadPool;
class Writeback;
struct WritebackStats;

// Where a slice's blocks are when the object store does not have them yet: staged for
// write-back by a client (see Writeback), as metadata records it.
struct StagedInfo {
  bool staged = false;        // the slice is marked staged
  bool writer_alive = false;  // the client that staged it still runs (it is uploading)
  std::string where;          // "host H (session S)", for messages
};
using StagedCheck = std::function<StagedInfo(uint64_t slice_id)>;

// Where a packed slice is (meta's "PL" record): bytes [off, off+size) of pack object `pack`,
// pack_len bytes long. pack 0: the slice is stored as blocks of its own.
struct PackRef {
  uint64_t pack = 0;
  uint32_t pack_len = 0;
  uint32_t off = 0;
};
// Small-file packing (with write-back): a new pack id, and the record of a stored pack's
// members (Meta::RecordPack).
struct PackEntry {
  uint64_t slice = 0;
  uint32_t off = 0;  // in the pack
  uint32_t len = 0;
};
struct PackMeta {
  std::function<Result<uint64_t>()> new_id;
  std::function<Status(uint64_t pack, uint32_t len, const std::vector<PackEntry>& members)> record;
};

struct StoreConfig {
  std::string volume;               // key prefix of every block (BlockKey)
  uint32_t block_size = 4 << 20;    // fixed at format time; > 0
  uint64_t cache_bytes = 1 << 30;   // memory block cache capacity
  int upload_threads = 16;
  int download_threads = 16;
  // The write-memory budget, owned here: SliceWriter buffers count against it until their
  // block is uploaded, and writers wait for room with CachedStore::WaitForBufferRoom.
  uint64_t buffer_bytes = 300 << 20;
  // Keep uploaded blocks in the memory cache. Off by default: this client's kernel page
  // cache already holds what it wrote, and caching every written block would fill the
  // cache with fresh memory (page faults on every write) and evict blocks read for real.
  bool cache_writes = false;
  // The disk cache; none when disk.dirs is empty.
  DiskCacheOptions disk;
  // Every uploaded block enters the disk cache, not only those of small files.
  bool cache_writes_to_disk = false;
  // Small-file packing with write-back (Writeback::Options::pack_below); 0: none.
  uint32_t pack_below = 0;
  uint32_t pack_bytes = 16u << 20;
};

struct StoreStats {
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_bytes = 0;
  uint64_t cache_blocks = 0;
  uint64_t gets = 0;         // object gets issued, whole-block and ranged
  uint64_t ranged_gets = 0;  // of which ranged (small random reads, not cached)
  uint64_t puts = 0;         // object puts issued (the store's client may retry each)
  uint64_t upload_failures = 0;  // blocks whose upload failed after all retries
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_uploaded = 0;
  uint64_t uploads_in_flight = 0;  // queued or running block uploads
  uint64_t buffered_bytes = 0;
  uint64_t evictions = 0;  // memory cache
  DiskCacheStats disk;
  // The cache group (zero without one).
  uint64_t peer_hits = 0;      // blocks received from their owner in the group
  uint64_t peer_bytes = 0;     // bytes of those blocks
  uint64_t peer_failures = 0;  // asks that failed (dead, slow, refused, damaged): went to the store
  uint64_t peer_hedged = 0;    // asks the store answered first (the owner was slow)
  uint64_t peer_served = 0;    // blocks this member served to others
  uint64_t peer_served_bytes = 0;
  // Write-back (zero without it).
  bool writeback = false;
  uint64_t staged_blocks = 0, staged_bytes = 0, wb_uploaded_blocks = 0, wb_uploaded_bytes = 0, wb_retries = 0,
           wb_stage_errors = 0, wb_lost = 0;
  uint64_t staged_waits = 0;  // reads that waited for a block another client had staged
  uint64_t packs = 0, packed_blocks = 0;  // pack objects written, and the small blocks in them
};

class CachedStore {
 public:
  CachedStore(std::unique_ptr<ObjectStore> store, StoreConfig cfg);
  // Waits for queued uploads and prefetches (prefetches not yet started are skipped).
  ~CachedStore();
  CachedStore(const CachedStore&) = delete;
  CachedStore& operator=(const CachedStore&) = delete;

  ObjectStore* store() { return store_.get(); }
  const StoreConfig& config() const { return cfg_; }
  BlockCache* cache() { return &cache_; }
  // The disk cache, or null when there is none.
  DiskCache* disk() { return disk_ && disk_->enabled() ? disk_.get() : nullptr; }
  BufferPool* pool() { return pool_.get(); }

  // Fills dst with bytes [off, off+len) of slice `id`, which is `size` bytes long. Whole
  // blocks go through the memory cache, one fetch per block however many readers want it.
  // A small piece (< 1/4 of its block) of a block that is neither cached nor being fetched
  // is read with a ranged get and not cached (in a cache group, the whole block is fetched). Errors: EINVAL when the range passes the end
  // of the slice; EIO naming the object key when a block is missing or has the wrong size;
  // other store errors keep their code and gain the key.
  // With `refs`, bytes of a block held in memory are not copied: a window of the block is
  // appended to refs instead, and bytes read any other way land in dst and are appended as
  // a scratch piece. dst must still have room for len bytes.
  // A packed slice (pack.pack != 0) is one block, cached under its PackedBlockKey and
  // fetched with a ranged get of its pack.
  Status ReadSlice(uint64_t id, uint32_t size, uint32_t off, uint32_t len, char* dst, ReadPieces* refs = nullptr,
                   const PackRef& pack = {});

  // Starts background fetches into the cache of the whole blocks covering [off, off+len),
  // skipping blocks that are cached or being fetched, and giving up silently when the
  // download queue is full. Failures are only logged.
  void Prefetch(uint64_t id, uint32_t size, uint32_t off, uint32_t len, const PackRef& pack = {});
  // Whether a slice of this size, committed while staged, is to be packed (its record then
  // carries kRecordMayBePacked and MarkStaged is told so).
  bool PackableSize(uint32_t size) const {
    return writeback() && pack_meta_.record && size > 0 && size <= cfg_.pack_below;
  }

  // Warm-up and eviction of whole blocks (`tierfs warmup`), by object key. Where: 2 when the
  // block is on disk, 1 when only in memory, 0 when not cached.
  int CachedLevel(const std::string& key);
  // Brings the block into the disk cache (into memory when there is no disk cache), waiting
  // for it; *fetched says whether it came from the store.
  Status WarmBlock(const std::string& key, uint32_t block_len, bool* fetched);
  // `tierfs warmup --cache-group`: the block into its owner's caches (the owner fetches it
  // from the store once and keeps it; *remote is set), or into this member's own when it
  // owns the block, has no group, or cannot reach the owner.
  Status WarmBlockForGroup(const std::string& key, uint32_t block_len, bool* fetched, bool* remote);
  void EvictBlock(const std::string& key);

  // The cache key of block `index` of a slice (its PackedBlockKey when packed).
  std::string KeyOf(uint64_t id, uint32_t index, uint32_t block_len, const PackRef& pack) const;

  std::unique_ptr<SliceWriter> NewSliceWriter(uint64_t slice_id);

  // Deletes every block object of the slice (missing ones are fine) and drops them from the
  // cache. Tries every block; returns the first error, naming its key.
  Status DeleteSlice(uint64_t id, uint32_t size);
  // Deletes a dead pack object (missing is fine).
  Status DeletePack(uint64_t pack, uint32_t len);

  // Bytes held in the unuploaded buffers of all live SliceWriters; a block counts until its
  // upload finishes.
  uint64_t buffered_bytes() const;
  // Write backpressure against config().buffer_bytes. Returns true at once if
  // buffered_bytes() is within the budget; otherwise blocks until it is, or until no upload
  // is queued or running, and returns whether it is within the budget then. false means the
  // buffers over budget are not shrinking by themselves: the caller must finish (or abort)
  // writers to release them.
  bool WaitForBufferRoom();

  // `mount --writeback`: blocks are staged durably in dir (created; locked against other
  // processes) and uploaded in the background by `threads` threads, each upload_delay after
  // it was staged, starting with what an earlier process left there. Call before writes
  // start. EBUSY when another process stages there.
  // Packing (cfg.pack_below) needs pack_meta set first (SetPackMeta).
  Status StartWriteback(const std::string& dir, int threads, std::chrono::milliseconds upload_delay = {});
  void SetPackMeta(PackMeta m) { pack_meta_ = std::move(m); }
  bool writeback() const { return writeback_ != nullptr; }
  // Whether any block of slice id is staged and not yet in the store.
  bool SliceStaged(uint64_t id);
  // The slice was committed with a staged mark in metadata (Meta::WriteSlice); marks
  // whose blocks have all reached the store since come back from TakeUploadedMarks once.
  void MarkStaged(uint64_t id, bool packable = false);
  std::vector<uint64_t> TakeUploadedMarks();
  // Waits (at most max) until every staged block is uploaded; progress is called about
  // every 10 s meanwhile. Returns what is still staged.
  WritebackStats DrainWriteback(std::chrono::milliseconds max,
                                const std::function<void(const WritebackStats&)>& progress);
  // Consulted when the store lacks a block: a block another client staged and still
  // uploads is waited for (up to kStagedWait), instead of reported missing.
  void SetStagedCheck(StagedCheck check);

  // Joins the cache group: blocks missed on disk are asked from their owner before the
  // store. Set before reads start; `peers` outlives this store (its prefetches included).
  void SetPeers(PeerSource* peers) { peers_.store(peers); }
  // A whole block for a member of the group that asked for it (this member owns it): from
  // memory, disk or, once for all members asking at the same time, from the store (never
  // from another member); kept in memory and on disk. keep_on_disk (a warm-up): on disk
  // before this returns, never dropped from a full fill queue.
  Result<std::shared_ptr<const std::string>> ServeBlock(const std::string& key, uint32_t block_len,
                                                        bool keep_on_disk = false);

  StoreStats stats() const;

 private:
  friend class SliceWriter;

  // One whole-block fetch that concurrent readers share. Fields are written under mu_
  // before done is set, and never change afterwards.
  struct Fetch {
    std::condition_variable cv;
    // Set before the fetch is registered: the block enters the memory cache when it
    // arrives. Off only for a full-size block one read consumes whole (see ReadSpan); a
    // reader that misses it after the fetch ended fetches it again.
    bool keep_in_memory = true;
    bool done = false;
    Status status;
    std::shared_ptr<const std::string> data;
  };

  Status ReadSpan(const std::string& key, uint32_t block_len, uint32_t off_in_block, uint32_t len, char* dst,
                  ReadPieces* refs);
  // Registers and queues a background fetch unless the block is cached or in flight.
  void PrefetchBlock(const std::string& key, uint32_t block_len);
  // Gets the whole block, validates its length, caches it and wakes the waiters.
  // disk_missed: the caller just looked in the disk cache and did not find the block.
  void RunFetch(const std::string& key, uint32_t block_len, const std::shared_ptr<Fetch>& fetch,
                bool disk_missed = false, bool ask_peers = true);
  // Runs `fetch` when this caller registered it in inflight_ (owner), else waits for the
  // caller that did; the block or the fetch's error.
  Result<std::shared_ptr<const std::string>> CompleteFetch(const std::string& key, uint32_t block_len,
                                                           const std::shared_ptr<Fetch>& fetch, bool owner,
                                                           bool disk_missed, bool ask_peers);
  // sums (when not null): the block's segment checksums, when the store verified them
  // (ObjectStore::GetVerified), for the disk cache.
  Result<std::shared_ptr<const std::string>> GetBlock(const std::string& key, uint32_t block_len,
                                                      std::vector<uint32_t>* sums = nullptr);
  // The whole block from the disk cache (unless disk_missed), else from its owner in the
  // cache group (when ask_peers), else from the store; queued for the disk when it did not
  // come from there.
  Result<std::shared_ptr<const std::string>> FetchBlock(const std::string& key, uint32_t block_len,
                                                        bool disk_missed = false, bool ask_peers = true);
  Status GetRange(const std::string& key, uint32_t off_in_block, uint32_t len, char* dst);
  // The object-store read behind a cache key: [off, off+len) of a block, or of a packed
  // slice's range of its pack (whole: the entire block, len its length).
  // sums: ObjectStore::GetVerified's, for a whole block that is an object of its own.
  Result<std::string> StoreGet(const std::string& key, uint32_t off, uint32_t len, bool whole,
                               std::vector<uint32_t>* sums = nullptr);

  // After the store answered ENOENT for key: waits while the block's slice is staged by a
  // live client, calling get again; returns get's result, or an error saying where the
  // block is when it cannot come.
  Result<std::string> WaitForStaged(const std::string& key, Result<std::string> missing,
                                    const std::function<Result<std::string>()>& get);
  // Stages the block (write-back), or puts it with retries.
  Status StageOrPut(const std::string& key, const std::shared_ptr<const std::string>& data, bool* staged);

  // For SliceWriter. AddBuffered is called as write buffers grow; the upload task releases
  // the block's bytes when it ends (success or failure). `done` runs on an upload thread
  // after the put, the cache insert on success and the release of the block's bytes; it is
  // the task's last action, so the writer may be destroyed as soon as it returns.
  void AddBuffered(uint64_t bytes);
  void ReleaseBuffered(uint64_t bytes);
  // Uploads on the upload pool, or in the calling thread when in_caller (the caller is
  // about to wait for it anyway: saves two thread hand-offs per small file). An upload that
  // starts once *abandoned is set (another block of its slice failed: the slice can never
  // be committed) ends at once with ECANCELED instead of asking the store.
  void UploadAsync(std::string key, std::shared_ptr<const std::string> data, std::function<void(const Status&)> done,
                   bool in_caller = false, std::shared_ptr<const std::atomic<bool>> abandoned = nullptr);
  void UploadNow(const std::string& key, std::shared_ptr<const std::string> data,
                 const std::function<void(const Status&)>& done, const std::atomic<bool>* abandoned = nullptr);
  // One put of a block (the store's client is the one layer that retries).
  Status PutBlock(const std::string& key, std::string_view data);
  // The error of the key's last store request when it failed slowly (the store did not
  // answer) a moment ago, else OK; NoteFailure records a request that began at started_ns.
  Status RecentFailure(const std::string& key);
  void NoteFailure(const std::string& key, const Status& st, int64_t started_ns);
  // Deletes one block from the store and the cache; missing is fine.
  Status DeleteBlock(const std::string& key);

  std::unique_ptr<ObjectStore> store_;
  const StoreConfig cfg_;
  std::shared_ptr<BufferPool> pool_;  // recycles block memory of writes and fetches
  BlockCache cache_;
  std::unique_ptr<DiskCache> disk_;
  std::unique_ptr<Writeback> writeback_;  // after disk_: its uploads fill the disk cache
  PackMeta pack_meta_;
  // Slices this client packed lately, with where: a reader holding a map from before the
  // pack was recorded (pack 0) finds them in the pack (and the disk cache) without a miss.
  // Bounded: the oldest go first (a stale map is then re-read after a miss).
  mutable std::mutex packed_mu_;
  std::unordered_map<uint64_t, PackRef> recently_packed_;
  std::deque<uint64_t> recently_packed_order_;
  std::mutex staged_check_mu_;
  StagedCheck staged_check_;
  std::atomic<uint64_t> staged_waits_{0};
  std::atomic<PeerSource*> peers_{nullptr};

  std::mutex mu_;  // guards inflight_
  std::unordered_map<std::string, std::shared_ptr<Fetch>> inflight_;
  std::mutex failed_mu_;  // guards failed_: key -> (when, error) of slow failures
  std::unordered_map<std::string, std::pair<int64_t, Status>> failed_;

  mutable std::mutex buf_mu_;  // guards buffered_ and uploads_in_flight_
  std::condition_variable buf_cv_;
  uint64_t buffered_ = 0;
  uint64_t uploads_in_flight_ = 0;

  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> gets_{0}, ranged_gets_{0}, puts_{0}, upload_failures_{0};
  std::atomic<uint64_t> bytes_downloaded_{0}, bytes_uploaded_{0};
  std::atomic<uint64_t> peer_hits_{0}, peer_bytes_{0}, peer_failures_{0}, peer_served_{0}, peer_served_bytes_{0};
  std::atomic<uint64_t> hedged_{0};

  // Declared last so they are joined before the state their tasks use is destroyed.
  std::unique_ptr<ThreadPool> upload_pool_;
  std::unique_ptr<ThreadPool> download_pool_;
};

}  // namespace tierfs
