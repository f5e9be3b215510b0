#include "chunk/cached_store.h"

#include "chunk/peer_source.h"
#include "chunk/read_pieces.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "chunk/block_key.h"
#include "chunk/cache_file.h"
#include "chunk/slice_writer.h"
#include "chunk/writeback.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/io_budget.h"
#include "common/thread_pool.h"

namespace tierfs {

namespace {

// How long a read waits for a block another (live) client staged and is still uploading.
constexpr std::chrono::seconds kStagedWait{600};
// A block whose store request failed after waiting at least kSlowFailure (the store hung or
// unreachable: its client retried until its deadline) fails again at once for kFailureMemo:
// the kernel answers a failed readahead by reading the page again, and without this a user
// would wait the whole --io-timeout twice for one read(2). Only the store's own failures
// count: a block missing, or staged by a client that is not running, is not remembered
// (it may land any moment).
constexpr int64_t kSlowFailureNs = 1000000000;
constexpr int64_t kFailureMemoNs = 5000000000;
constexpr size_t kMaxFailureMemo = 4096;

}  // namespace

CachedStore::CachedStore(std::unique_ptr<ObjectStore> store, StoreConfig cfg)
    : store_(std::move(store)),
      cfg_(std::move(cfg)),
      pool_(BufferPool::Create(std::min<uint64_t>(32ull << 20, std::max<uint64_t>(cfg_.buffer_bytes / 8, 8ull << 20)))),
      cache_(cfg_.cache_bytes) {
  assert(cfg_.block_size > 0);
  if (!cfg_.disk.dirs.empty()) disk_ = std::make_unique<DiskCache>(cfg_.disk);
  int up = std::max(1, cfg_.upload_threads);
  int down = std::max(1, cfg_.download_threads);
  // The upload queue is short on purpose: a full queue blocks SliceWriter::Write, which is
  // the backpressure that keeps writers from outrunning the store.
  upload_pool_ = std::make_unique<ThreadPool>("tierfs-upload", up, static_cast<size_t>(up));
  download_pool_ = std::make_unique<ThreadPool>("tierfs-download", down, static_cast<size_t>(down) * 2);
}

CachedStore::~CachedStore() {
  shutting_down_ = true;
  upload_pool_.reset();
  download_pool_.reset();
  writeback_.reset();  // stops its uploads; what is staged stays for the next process
}

std::string CachedStore::KeyOf(uint64_t id, uint32_t index, uint32_t block_len, const PackRef& pack) const {
  if (pack.pack != 0) return PackedBlockKey(cfg_.volume, pack.pack, pack.pack_len, pack.off);
  if (index == 0 && pack_meta_.record) {
    std::lock_guard<std::mutex> l(packed_mu_);
    auto it = recently_packed_.find(id);
    if (it != recently_packed_.end()) return PackedBlockKey(cfg_.volume, it->second.pack, it->second.pack_len, it->second.off);
  }
  return BlockKey(cfg_.volume, id, index, block_len);
}

Result<std::string> CachedStore::StoreGet(const std::string& key, uint32_t off, uint32_t len, bool whole,
                                          std::vector<uint32_t>* sums) {
  if (sums) sums->clear();
  std::string pack_key;
  uint32_t pack_off = 0;
  if (ParsePackedBlockKey(key, &pack_key, &pack_off)) return store_->Get(pack_key, pack_off + off, len);
  static_assert(kVerifiedSegment == kCacheSegment, "the disk cache keeps the checksums the store verified");
  if (whole && sums) return store_->GetVerified(key, sums);
  if (whole) return store_->Get(key);
  return store_->Get(key, off, len);
}

Status CachedStore::ReadSlice(uint64_t id, uint32_t size, uint32_t off, uint32_t len, char* dst, ReadPieces* refs,
                              const PackRef& pack) {
  if (len == 0) return Status::OK();
  if (static_cast<uint64_t>(off) + len > size) {
    return Status::Err(EINVAL, "read of bytes [" + std::to_string(off) + ", " +
                                   std::to_string(static_cast<uint64_t>(off) + len) + ") of slice " +
                                   std::to_string(id) + " passes its end (" + std::to_string(size) +
                                   " bytes)");
  }
  if (pack.pack != 0 && size > cfg_.block_size) {
    return Status::Err(EIO, "slice " + std::to_string(id) + " is recorded in a pack but is larger than a block");
  }
  std::vector<BlockSpan> spans = BlockSpans(size, cfg_.block_size, off, len);
  // A read that spans several blocks fetches the later ones in the background while this
  // thread fetches the first, instead of one after another.
  for (size_t i = 1; i < spans.size(); ++i) {
    uint32_t block_len = BlockLength(size, cfg_.block_size, spans[i].index);
    if (static_cast<uint64_t>(spans[i].len) * 4 >= block_len) {
      PrefetchBlock(KeyOf(id, spans[i].index, block_len, pack), block_len);
    }
  }
  for (const BlockSpan& span : spans) {
    uint32_t block_len = BlockLength(size, cfg_.block_size, span.index);
    RETURN_IF_ERROR(
        ReadSpan(KeyOf(id, span.index, block_len, pack), block_len, span.offset_in_block, span.len, dst, refs));
    dst += span.len;
  }
  return Status::OK();
}

namespace {
// Hands [off, off+len) of a shared block to the reader: a reference when it takes pieces,
// else a copy into dst.
void Deliver(std::shared_ptr<const std::string> block, uint32_t off, uint32_t len, char* dst, ReadPieces* refs) {
  if (refs) {
    refs->AddBlock(std::move(block), off, len);
  } else {
    std::memcpy(dst, block->data() + off, len);
  }
}
}  // namespace

Status CachedStore::ReadSpan(const std::string& key, uint32_t block_len, uint32_t off_in_block, uint32_t len,
                             char* dst, ReadPieces* refs) {
  if (auto block = cache_.Get(key)) {
    Deliver(std::move(block), off_in_block, len, dst, refs);
    return Status::OK();
  }
  if (disk_ && disk_->Read(key, block_len, off_in_block, len, dst)) {
    if (refs) refs->AddScratch(dst, len);
    return Status::OK();
  }
  if (writeback_) {
    if (auto block = writeback_->Read(key)) {
      Deliver(std::move(block), off_in_block, len, dst, refs);
      return Status::OK();
    }
  }
  RETURN_IF_ERROR(RecentFailure(key));
  std::shared_ptr<Fetch> fetch;
  bool owner = false;
  {
    std::unique_lock<std::mutex> l(mu_);
    auto it = inflight_.find(key);
    if (it != inflight_.end()) {
      fetch = it->second;
    } else {
      // A fetch may have completed between the cache miss and taking mu_; completions
      // insert into the cache before leaving inflight_, so this re-check cannot miss it
      // (unless the fetch kept nothing in memory: Fetch::keep_in_memory).
      if (auto block = cache_.Peek(key)) {
        l.unlock();
        Deliver(std::move(block), off_in_block, len, dst, refs);
        return Status::OK();
      }
      // In a cache group a small piece fetches the whole block too (from its owner, which
      // keeps it), so that the group, not each member, pays the store for it once.
      if (static_cast<uint64_t>(len) * 4 < block_len && !peers_.load()) {
        l.unlock();
        RETURN_IF_ERROR(GetRange(key, off_in_block, len, dst));
        if (refs) refs->AddScratch(dst, len);
        return Status::OK();
      }
      fetch = std::make_shared<Fetch>();
      // One read that consumes the whole block (a small file, an aligned large read): the
      // kernel's page cache keeps it for re-reads, so a full-size block is not kept in
      // memory as well (readahead still fills the cache); a small file's is, since data
      // sets of small files are read again from other handles and after the kernel
      // dropped its pages. Either way the fetch is shared: concurrent first readers of a
      // block (O_DIRECT readers of one small file) cost one GET.
      fetch->keep_in_memory = !(off_in_block == 0 && len == block_len && block_len >= cfg_.block_size);
      inflight_.emplace(key, fetch);
      owner = true;
    }
  }
  ASSIGN_OR_RETURN(auto block, CompleteFetch(key, block_len, fetch, owner, /*disk_missed=*/disk_ != nullptr,
                                              /*ask_peers=*/true));
  Deliver(std::move(block), off_in_block, len, dst, refs);
  return Status::OK();
}

Result<std::shared_ptr<const std::string>> CachedStore::CompleteFetch(const std::string& key, uint32_t block_len,
                                                                       const std::shared_ptr<Fetch>& fetch, bool owner,
                                                                       bool disk_missed, bool ask_peers) {
  if (owner) {
    RunFetch(key, block_len, fetch, disk_missed, ask_peers);
  } else {
    std::unique_lock<std::mutex> l(mu_);
    fetch->cv.wait(l, [&] { return fetch->done; });
  }
  if (!fetch->status.ok()) return fetch->status;
  return fetch->data;
}

void CachedStore::Prefetch(uint64_t id, uint32_t size, uint32_t off, uint32_t len, const PackRef& pack) {
  if (pack.pack != 0 && size > cfg_.block_size) return;
  for (const BlockSpan& span : BlockSpans(size, cfg_.block_size, off, len)) {
    uint32_t block_len = BlockLength(size, cfg_.block_size, span.index);
    PrefetchBlock(KeyOf(id, span.index, block_len, pack), block_len);
  }
}

void CachedStore::PrefetchBlock(const std::string& key, uint32_t block_len) {
  if (shutting_down_ || cache_.Contains(key) || !RecentFailure(key).ok()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (inflight_.count(key) != 0 || cache_.Contains(key)) return;
  auto fetch = std::make_shared<Fetch>();
  // Submitted under mu_ so that no reader can start waiting on a fetch that is then not
  // queued. TrySubmit never blocks, and pool tasks take mu_ only while running.
  bool queued = download_pool_->TrySubmit([this, key, block_len, fetch] {
    if (shutting_down_) {
      // Nobody can be waiting: readers are gone before the store is destroyed.
      std::lock_guard<std::mutex> l2(mu_);
      inflight_.erase(key);
      fetch->status = Status::Err(ECANCELED, "prefetch of block " + key + " cancelled at shutdown");
      fetch->done = true;
      fetch->cv.notify_all();
      return;
    }
    RunFetch(key, block_len, fetch);
    if (!fetch->status.ok()) spdlog::warn("prefetch failed: {}", fetch->status.ToString());
  });
  if (queued) inflight_.emplace(key, std::move(fetch));
}

void CachedStore::RunFetch(const std::string& key, uint32_t block_len, const std::shared_ptr<Fetch>& fetch,
                           bool disk_missed, bool ask_peers) {
  auto got = FetchBlock(key, block_len, disk_missed, ask_peers);
  if (got.ok() && fetch->keep_in_memory) cache_.Put(key, *got);
  std::lock_guard<std::mutex> l(mu_);
  auto it = inflight_.find(key);
  if (it != inflight_.end() && it->second == fetch) inflight_.erase(it);
  if (got.ok()) {
    fetch->data = std::move(got).value();
  } else {
    fetch->status = got.status();
  }
  fetch->done = true;
  fetch->cv.notify_all();
}

Result<std::shared_ptr<const std::string>> CachedStore::GetBlock(const std::string& key, uint32_t block_len,
                                                                  std::vector<uint32_t>* sums) {
  gets_++;
  int64_t t0 = MonoNanos();
  // Received into recycled memory, which the block returns to when the caches let go.
  ReceiveInto receive(pool_.get());
  auto got = StoreGet(key, 0, block_len, true, sums);
  if (!got.ok() && got.status().code() != ENOENT) NoteFailure(key, got.status().With("reading block " + key), t0);
  if (!got.ok() && got.status().code() == ENOENT) {
    got = WaitForStaged(key, std::move(got), [&] {
      gets_++;
      return StoreGet(key, 0, block_len, true, sums);
    });
  }
  if (!got.ok()) {
    if (got.status().code() == ENOENT) {
      return Status::Err(EIO, "block " + key + " is missing from object storage (" + store_->Describe() + ")");
    }
    return got.status().With("reading block " + key);
  }
  bytes_downloaded_ += got->size();
  if (got->size() != block_len) {
    return Status::Err(EIO, "block " + key + " is corrupt: " + std::to_string(got->size()) +
                                " bytes in object storage, expected " + std::to_string(block_len));
  }
  return pool_->Share(std::move(got).value());
}

Result<std::shared_ptr<const std::string>> CachedStore::FetchBlock(const std::string& key, uint32_t block_len,
                                                                    bool disk_missed, bool ask_peers) {
  if (disk_ && !disk_missed) {
    if (auto block = disk_->ReadBlock(key, block_len, pool_.get())) return block;
  }
  if (writeback_) {
    if (auto block = writeback_->Read(key)) return block;
  }
  PeerSource* peers = ask_peers ? peers_.load() : nullptr;
  if (peers) {
    bool from_peer = false, store_asked = false;
    auto got = peers->Fetch(
        key, block_len,
        [&] {
          store_asked = true;
          return GetBlock(key, block_len);
        },
        &from_peer);
    if (from_peer) {
      peer_hits_++;
      peer_bytes_ += (*got)->size();
      if (disk_) disk_->Put(key, *got);
      return got;
    }
    if (store_asked) {  // the owner was slow and the hedged GET answered first: it stands
      hedged_++;
      if (got.ok() && disk_) disk_->Put(key, *got);
      return got;
    }
    if (got.status().code() != ENODATA) peer_failures_++;
  }
  std::vector<uint32_t> sums;
  auto got = GetBlock(key, block_len, &sums);
  if (got.ok() && disk_) disk_->Put(key, *got, std::move(sums));
  return got;
}

Result<std::shared_ptr<const std::string>> CachedStore::ServeBlock(const std::string& key, uint32_t block_len,
                                                                    bool keep_on_disk) {
  std::shared_ptr<const std::string> block = cache_.Get(key);
  if (!block) {
    std::shared_ptr<Fetch> fetch;
    bool owner = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = inflight_.find(key);
      if (it != inflight_.end()) {
        fetch = it->second;
      } else if (!(block = cache_.Peek(key))) {
        fetch = std::make_shared<Fetch>();
        inflight_.emplace(key, fetch);
        owner = true;
      }
    }
    if (fetch) {
      // Never from another member: whoever asked chose this member as the owner, and
      // members whose views of the ring differ must not send a request around in a loop.
      ASSIGN_OR_RETURN(block, CompleteFetch(key, block_len, fetch, owner, /*disk_missed=*/false,
                                            /*ask_peers=*/false));
    }
  }
  if (keep_on_disk) {
    if (DiskCache* d = disk()) d->PutNow(key, block);
  }
  // The key names the block's length (the server checks len against it), and every block
  // cached or fetched under a key has been checked to have that length.
  peer_served_++;
  peer_served_bytes_ += block->size();
  return block;
}

Status CachedStore::GetRange(const std::string& key, uint32_t off_in_block, uint32_t len, char* dst) {
  gets_++;
  ranged_gets_++;
  int64_t t0 = MonoNanos();
  auto got = StoreGet(key, off_in_block, len, false);
  if (!got.ok() && got.status().code() != ENOENT) NoteFailure(key, got.status().With("reading block " + key), t0);
  if (!got.ok() && got.status().code() == ENOENT) {
    got = WaitForStaged(key, std::move(got), [&] {
      gets_++;
      ranged_gets_++;
      return StoreGet(key, off_in_block, len, false);
    });
  }
  if (!got.ok()) {
    if (got.status().code() == ENOENT) {
      return Status::Err(EIO, "block " + key + " is missing from object storage (" + store_->Describe() + ")");
    }
    return got.status().With("reading block " + key);
  }
  bytes_downloaded_ += got->size();
  if (got->size() != len) {
    return Status::Err(EIO, "block " + key + " is corrupt: reading " + std::to_string(len) + " bytes at offset " +
                                std::to_string(off_in_block) + " returned " + std::to_string(got->size()));
  }
  std::memcpy(dst, got->data(), len);
  return Status::OK();
}

int CachedStore::CachedLevel(const std::string& key) {
  if (disk_ && disk_->Contains(key)) return 2;
  return cache_.Contains(key) ? 1 : 0;
}

Status CachedStore::WarmBlock(const std::string& key, uint32_t block_len, bool* fetched) {
  *fetched = false;
  DiskCache* d = disk();
  if (d ? d->Contains(key) : cache_.Contains(key)) return Status::OK();
  std::shared_ptr<const std::string> block = cache_.Peek(key);
  if (!block) {
    ASSIGN_OR_RETURN(block, GetBlock(key, block_len));
    *fetched = true;
  }
  if (d) {
    d->PutNow(key, block);
  } else {
    cache_.Put(key, std::move(block));
  }
  return Status::OK();
}

Status CachedStore::WarmBlockForGroup(const std::string& key, uint32_t block_len, bool* fetched, bool* remote) {
  *remote = false;
  if (PeerSource* peers = peers_.load()) {
    bool from_peer = false;
    // No hedge (an empty StoreGet): filling the owner is the point, so wait for it.
    auto got = peers->Fetch(key, block_len, {}, &from_peer);
    if (from_peer) {
      *fetched = false;  // whether the owner had it is the owner's business
      *remote = true;
      return Status::OK();
    }
  }
  return WarmBlock(key, block_len, fetched);
}

void CachedStore::EvictBlock(const std::string& key) {
  cache_.Erase(key);
  if (disk_) disk_->Erase(key);
}

std::unique_ptr<SliceWriter> CachedStore::NewSliceWriter(uint64_t slice_id) {
  return std::unique_ptr<SliceWriter>(new SliceWriter(this, slice_id));
}

Status CachedStore::DeleteSlice(uint64_t id, uint32_t size) {
  Status first;
  uint32_t n = BlockCount(size, cfg_.block_size);
  for (uint32_t i = 0; i < n; ++i) {
    Status st = DeleteBlock(BlockKey(cfg_.volume, id, i, BlockLength(size, cfg_.block_size, i)));
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status CachedStore::DeleteBlock(const std::string& key) {
  if (writeback_) writeback_->Discard(key);
  cache_.Erase(key);
  if (disk_) disk_->Erase(key);
  Status st = store_->Delete(key);
  if (!st.ok() && st.code() != ENOENT) return st.With("deleting block " + key);
  return Status::OK();
}

uint64_t CachedStore::buffered_bytes() const {
  std::lock_guard<std::mutex> l(buf_mu_);
  return buffered_;
}

bool CachedStore::WaitForBufferRoom() {
  const uint64_t limit = cfg_.buffer_bytes;
  std::unique_lock<std::mutex> l(buf_mu_);
  if (buffered_ <= limit) return true;
  buf_cv_.wait(l, [&] { return buffered_ <= limit || uploads_in_flight_ == 0; });
  return buffered_ <= limit;
}

void CachedStore::AddBuffered(uint64_t bytes) {
  std::lock_guard<std::mutex> l(buf_mu_);
  buffered_ += bytes;
}

void CachedStore::ReleaseBuffered(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> l(buf_mu_);
    assert(buffered_ >= bytes);
    buffered_ -= bytes;
  }
  buf_cv_.notify_all();
}

void CachedStore::UploadAsync(std::string key, std::shared_ptr<const std::string> data,
                              std::function<void(const Status&)> done, bool in_caller,
                              std::shared_ptr<const std::atomic<bool>> abandoned) {
  {
    std::lock_guard<std::mutex> l(buf_mu_);
    ++uploads_in_flight_;
  }
  if (in_caller) {
    UploadNow(key, std::move(data), done, abandoned.get());
    return;
  }
  upload_pool_->Submit([this, key = std::move(key), data = std::move(data), done = std::move(done),
                        abandoned = std::move(abandoned)]() mutable {
    UploadNow(key, std::move(data), done, abandoned.get());
  });
}

void CachedStore::UploadNow(const std::string& key, std::shared_ptr<const std::string> data,
                            const std::function<void(const Status&)>& done, const std::atomic<bool>* abandoned) {
  bool staged = false;
  Status st;
  bool skipped = abandoned && abandoned->load();
  if (skipped) {
    // A dead store would make this upload wait its whole --io-timeout too, for nothing.
    st = Status::Err(ECANCELED, "upload of block " + key + " skipped: another block of its slice failed");
  } else {
    st = StageOrPut(key, data, &staged);
  }
  uint64_t bytes = data->size();
  if (st.ok()) {
    if (!staged) {
      bytes_uploaded_ += bytes;
      // A staged block enters the disk cache when its upload lands (Writeback's callback).
      if (disk_ && (bytes < cfg_.block_size || cfg_.cache_writes_to_disk)) disk_->Put(key, data);
    }
    if (cfg_.cache_writes) cache_.Put(key, std::move(data));
  } else if (!skipped) {
    upload_failures_++;
    spdlog::error("upload of block {} failed: {}", key, st.ToString());
  }
  data.reset();
  // Accounting settles before the writer hears of it, so that once Finish returns its
  // bytes are no longer counted.
  {
    std::lock_guard<std::mutex> l(buf_mu_);
    assert(buffered_ >= bytes);
    buffered_ -= bytes;
    --uploads_in_flight_;
  }
  buf_cv_.notify_all();
  done(st);
}

Status CachedStore::StageOrPut(const std::string& key, const std::shared_ptr<const std::string>& data,
                               bool* staged) {
  *staged = false;
  if (writeback_ && writeback_->Stage(key, data).ok()) {
    *staged = true;
    return Status::OK();
  }
  return PutBlock(key, *data);
}

Status CachedStore::StartWriteback(const std::string& dir, int threads, std::chrono::milliseconds upload_delay) {
  std::vector<Staging::Entry> staged;
  std::vector<std::string> damaged;
  ASSIGN_OR_RETURN(auto staging, Staging::Open(dir, &staged, &damaged));
  Writeback::Options o;
  o.threads = threads;
  o.memory_bytes = cfg_.buffer_bytes / 4;
  o.delay = upload_delay;
  Writeback::PackFn pack;
  if (cfg_.pack_below > 0 && pack_meta_.new_id && pack_meta_.record) {
    o.pack_below = std::min(cfg_.pack_below, cfg_.block_size);
    o.pack_bytes = std::max(cfg_.pack_bytes, o.pack_below);
    pack = [this](const std::vector<Writeback::PackMember>& members, std::string_view data) -> Status {
      ASSIGN_OR_RETURN(uint64_t id, pack_meta_.new_id());
      uint32_t len = static_cast<uint32_t>(data.size());
      std::string key = PackKey(cfg_.volume, id, len);
      RETURN_IF_ERROR(PutBlock(key, data));
      bytes_uploaded_ += len;
      std::vector<PackEntry> entries;
      for (const auto& m : members) entries.push_back(PackEntry{m.slice, m.off, m.len});
      Status st = pack_meta_.record(id, len, entries);
      if (!st.ok()) {
        // Possibly recorded after all (an ambiguous commit): the object stays, and gc
        // deletes it if no member points at it.
        return st.With("recording pack " + key);
      }
      {
        constexpr size_t kRecentlyPacked = 1 << 17;
        std::lock_guard<std::mutex> l(packed_mu_);
        for (const auto& m : members) {
          if (recently_packed_.emplace(m.slice, PackRef{id, len, m.off}).second) recently_packed_order_.push_back(m.slice);
        }
        while (recently_packed_order_.size() > kRecentlyPacked) {
          recently_packed_.erase(recently_packed_order_.front());
          recently_packed_order_.pop_front();
        }
      }
      if (disk_) {
        for (const auto& m : members) {
          disk_->Put(PackedBlockKey(cfg_.volume, id, len, m.off),
                     std::make_shared<const std::string>(data.substr(m.off, m.len)));
        }
      }
      return Status::OK();
    };
  }
  writeback_ = std::make_unique<Writeback>(
      std::move(staging), staged,
      [this](const std::string& key, std::string_view data) {
        puts_++;
        Status st = store_->Put(key, data);
        if (st.ok()) bytes_uploaded_ += data.size();
        return st;
      },
      [this](const std::string& key) {
        Status st = store_->Delete(key);
        if (!st.ok() && st.code() != ENOENT) spdlog::warn("leaving block {} for garbage collection: {}", key, st.ToString());
      },
      [this](const std::string& key, const std::shared_ptr<const std::string>& data) {
        if (disk_ && data && (data->size() < cfg_.block_size || cfg_.cache_writes_to_disk)) disk_->Put(key, data);
      },
      o, std::move(pack));
  return Status::OK();
}

bool CachedStore::SliceStaged(uint64_t id) { return writeback_ && writeback_->HasSlice(id); }

void CachedStore::MarkStaged(uint64_t id, bool packable) {
  if (writeback_) writeback_->Mark(id, packable);
}

Status CachedStore::DeletePack(uint64_t pack, uint32_t len) {
  std::string key = PackKey(cfg_.volume, pack, len);
  Status st = store_->Delete(key);
  if (!st.ok() && st.code() != ENOENT) return st.With("deleting pack " + key);
  return Status::OK();
}

std::vector<uint64_t> CachedStore::TakeUploadedMarks() {
  return writeback_ ? writeback_->TakeUploadedMarks() : std::vector<uint64_t>{};
}

WritebackStats CachedStore::DrainWriteback(std::chrono::milliseconds max,
                                           const std::function<void(const WritebackStats&)>& progress) {
  return writeback_ ? writeback_->Drain(max, progress) : WritebackStats{};
}

void CachedStore::SetStagedCheck(StagedCheck check) {
  std::lock_guard<std::mutex> l(staged_check_mu_);
  staged_check_ = std::move(check);
}

Result<std::string> CachedStore::WaitForStaged(const std::string& key, Result<std::string> missing,
                                               const std::function<Result<std::string>()>& get) {
  StagedCheck check;
  {
    std::lock_guard<std::mutex> l(staged_check_mu_);
    check = staged_check_;
  }
  std::string volume;
  uint64_t id = 0;
  uint32_t index = 0, len = 0;
  if (!check || !ParseBlockKey(key, &volume, &id, &index, &len)) return missing;
  auto deadline = std::chrono::steady_clock::now() + kStagedWait;
  bool counted = false;
  for (int attempt = 0;; ++attempt) {
    StagedInfo info = check(id);
    if (!info.staged) return missing;
    if (!info.writer_alive) {
      return Status::Err(EIO, "block " + key + " is staged for write-back on " + info.where +
                                  ", whose client is not running: it reaches the object store when that client "
                                  "mounts the volume again, or when `tierfs upload-staged` runs there");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Err(EIO, "block " + key + " is still staged for write-back on " + info.where + " after " +
                                  std::to_string(kStagedWait.count()) + " s (is its object store reachable?)");
    }
    if (!counted) {
      staged_waits_++;
      counted = true;
    }
    std::this_thread::sleep_for(JitteredBackoff(attempt, std::chrono::milliseconds(100), std::chrono::seconds(2)));
    auto got = get();
    if (got.ok() || got.status().code() != ENOENT) return got;
  }
}

Status CachedStore::PutBlock(const std::string& key, std::string_view data) {
  // One call: the store's client retries within the request's budget (common/io_budget.h).
  puts_++;
  Status st = store_->Put(key, data);
  if (!st.ok()) return st.With("uploading block " + key);
  return st;
}

Status CachedStore::RecentFailure(const std::string& key) {
  std::lock_guard<std::mutex> l(failed_mu_);
  auto it = failed_.find(key);
  if (it == failed_.end()) return Status::OK();
  if (MonoNanos() - it->second.first > kFailureMemoNs) {
    failed_.erase(it);
    return Status::OK();
  }
  return it->second.second;
}

void CachedStore::NoteFailure(const std::string& key, const Status& st, int64_t started_ns) {
  int64_t now = MonoNanos();
  if (now - started_ns < kSlowFailureNs || st.code() == ECANCELED) return;
  std::lock_guard<std::mutex> l(failed_mu_);
  if (failed_.size() >= kMaxFailureMemo) {
    std::erase_if(failed_, [&](const auto& e) { return now - e.second.first > kFailureMemoNs; });
    if (failed_.size() >= kMaxFailureMemo) failed_.clear();
  }
  failed_[key] = {now, st};
}

StoreStats CachedStore::stats() const {
  StoreStats s;
  BlockCacheStats c = cache_.stats();
  s.cache_hits = c.hits;
  s.cache_misses = c.misses;
  s.cache_bytes = c.bytes;
  s.cache_blocks = c.blocks;
  s.evictions = c.evictions;
  if (disk_) s.disk = disk_->stats();
  s.gets = gets_;
  s.ranged_gets = ranged_gets_;
  s.puts = puts_;
  s.upload_failures = upload_failures_;
  s.bytes_downloaded = bytes_downloaded_;
  s.bytes_uploaded = bytes_uploaded_;
  s.peer_hits = peer_hits_;
  s.peer_bytes = peer_bytes_;
  s.peer_failures = peer_failures_;
  s.peer_hedged = hedged_;
  s.peer_served = peer_served_;
  s.peer_served_bytes = peer_served_bytes_;
  s.staged_waits = staged_waits_;
  if (writeback_) {
    WritebackStats w = writeback_->stats();
    s.writeback = true;
    s.staged_blocks = w.staged_blocks;
    s.staged_bytes = w.staged_bytes;
    s.wb_uploaded_blocks = w.uploaded_blocks;
    s.wb_uploaded_bytes = w.uploaded_bytes;
    s.wb_retries = w.retries;
    s.wb_stage_errors = w.stage_errors;
    s.wb_lost = w.lost;
    s.packs = w.packs;
    s.packed_blocks = w.packed_blocks;
  }
  std::lock_guard<std::mutex> l(buf_mu_);
  s.uploads_in_flight = uploads_in_flight_;
  s.buffered_bytes = buffered_;
  return s;
}

}  // namespace tierfs
