#include "vfs/vfs.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "chunk/cached_store.h"
#include "chunk/flat_files.h"
#include "common/clock.h"
#include "meta/slice_map.h"
#include "vfs/compactor.h"
#include "vfs/file_writer.h"
#include "vfs/vfs_internal.h"
#include "vfs/writeback_marks.h"

namespace tierfs {

Vfs::Vfs(Meta* meta, CachedStore* store, VfsOptions opts) : meta_(meta), store_(store), opts_(opts) {
  // A block another client staged for write-back is waited for, not reported missing.
  store_->SetStagedCheck(StagedCheckFor(meta_));
  if (!opts_.read_only) {
    compactor_ = std::make_unique<Compactor>(meta_, store_, [this](Ino ino) { DropMaps(ino); }, opts_.compactor);
  }
  flusher_ = std::thread([this] { FlusherLoop(); });
  meta_->SetSessionLossHandler([this](const SessionLoss& loss) { OnSessionLost(loss); });
}

void Vfs::DropMaps(Ino ino) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) return;
    st = it->second;
  }
  std::lock_guard<std::mutex> l(st->mu);
  st->RefreshLocked(nullptr, 0, InodeState::Cause::kChange);
}

Vfs::~Vfs() {
  flat_.reset();  // its builds read through the store
  meta_->SetSessionLossHandler(nullptr);
  {
    std::lock_guard<std::mutex> l(flusher_mu_);
    stopping_ = true;
  }
  flusher_cv_.notify_all();
  flusher_.join();
  Status at = FlushAtimes();
  if (!at.ok()) spdlog::error("writing access times at shutdown failed: {}", at.ToString());
  Status st = FlushAll();
  if (!st.ok()) spdlog::error("flushing buffered writes at shutdown failed: {}", st.ToString());
  compactor_.reset();
}

void Vfs::FlusherLoop() {
  pthread_setname_np(pthread_self(), "vfs-flusher");
  std::unique_lock<std::mutex> l(flusher_mu_);
  while (!stopping_) {
    flusher_cv_.wait_for(l, std::chrono::milliseconds(500));
    if (stopping_) break;
    l.unlock();
    std::vector<std::shared_ptr<InodeState>> due;
    {
      std::lock_guard<std::mutex> g(mu_);
      int64_t now = MonoNanos();
      for (auto it = dirty_.begin(); it != dirty_.end();) {
        auto st = it->second.lock();
        std::shared_ptr<FileWriter> w;
        if (st) {
          std::lock_guard<std::mutex> s(st->mu);
          w = st->writer;
        }
        if (!w || !w->Dirty()) {
          it = dirty_.erase(it);
          continue;
        }
        if (w->DirtySinceNs() && now - w->DirtySinceNs() > opts_.flush_age_ns) due.push_back(st);
        ++it;
      }
    }
    for (auto& st : due) {
      Status s = FlushInode(*st);
      if (!s.ok()) spdlog::error("background commit of inode {} failed: {}", st->ino, s.ToString());
    }
    Status s = FlushAtimes();
    if (!s.ok()) spdlog::warn("writing access times failed (retried): {}", s.ToString());
    l.lock();
  }
}

// Open, or holding writes not yet committed: its state must stay (the dirty list holds
// only a weak reference). The caller holds st.mu.
static bool InUse(const InodeState& st) { return st.opens > 0 || (st.writer && st.writer->Dirty()); }

std::shared_ptr<InodeState> Vfs::State(Ino ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto& st = inodes_[ino];
  if (!st) st = std::make_shared<InodeState>(ino, meta_);
  return st;
}

std::shared_ptr<Handle> Vfs::GetHandle(uint64_t fh) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = handles_.find(fh);
  return it == handles_.end() ? nullptr : it->second;
}

uint64_t Vfs::AddHandle(std::shared_ptr<Handle> h) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t fh = next_fh_++;
  handles_[fh] = std::move(h);
  return fh;
}

Status Vfs::FlushInode(InodeState& st) {
  std::shared_ptr<FileWriter> w;
  {
    std::lock_guard<std::mutex> l(st.mu);
    w = st.writer;
  }
  if (!w || !w->Dirty()) return Status::OK();
  return w->Flush();
}

std::shared_ptr<FileWriter> Vfs::Writer(InodeState& st) {
  std::lock_guard<std::mutex> l(st.mu);
  if (!st.writer) {
    // The state owns the writer, so the hook never outlives it.
    InodeState* sp = &st;
    Compactor* compactor = compactor_.get();
    Ino ino = st.ino;
    st.writer = std::make_shared<FileWriter>(
        st.ino, meta_, store_,
        [sp](const Attr* after) {
          std::lock_guard<std::mutex> g(sp->mu);
          sp->RefreshLocked(after, /*read_gen=*/0, InodeState::Cause::kCommit);
        },
        [compactor, ino](uint32_t chunk) {
          if (compactor) compactor->NoteCommit(ino, chunk);
        });
  }
  return st.writer;
}

Status Vfs::FlushAll() {
  std::vector<std::shared_ptr<InodeState>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [ino, st] : inodes_) all.push_back(st);
  }
  Status first;
  for (auto& st : all) {
    Status s = FlushInode(*st);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Attr Vfs::MergePending(Ino ino, Attr a) {
  std::shared_ptr<InodeState> st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) return a;
    st = it->second;
  }
  std::shared_ptr<FileWriter> w;
  {
    std::lock_guard<std::mutex> l(st->mu);
    w = st->writer;
    a.atime_ns = std::max(a.atime_ns, st->pending_atime_ns);  // read here, not written yet
  }
  if (w) {
    a.length = std::max(a.length, w->PendingLength());
    a.allocated += w->PendingBytes();  // capped by the length where it is shown
  }
  return a;
}

Result<Entry> Vfs::Lookup(const Ctx& ctx, Ino parent, const std::string& name) {
  ASSIGN_OR_RETURN(auto r, meta_->Lookup(ctx, parent, name));
  return Entry{r.first, MergePending(r.first, r.second)};
}

Result<Attr> Vfs::GetAttr(Ino ino) {
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  return MergePending(ino, a);
}

Result<Attr> Vfs::SetAttr(const Ctx& ctx, Ino ino, uint32_t mask, const Attr& in, uint64_t fh) {
  ForgetOpenCache(ino);
  if (mask & (kSetAtime | kSetMtime | kSetAtimeNow | kSetMtimeNow)) {
    // Buffered writes commit with their own mtime: commit them first so that times set
    // explicitly afterwards (cp -a, tar -x, touch) are the ones that stay.
    auto st = State(ino);
    RETURN_IF_ERROR(FlushInode(*st));
  }
  if (fh != 0 && GetHandle(fh)) RETURN_IF_ERROR(UsableHandle(fh).status());  // ftruncate of a fenced file
  if (mask & kSetSize) {
    auto st = State(ino);
    RETURN_IF_ERROR(FlushInode(*st));
    if (fh == 0) {
      ASSIGN_OR_RETURN(Attr cur, meta_->GetAttr(ino));
      if (!cur.IsDir()) RETURN_IF_ERROR(meta_->CheckAccess(ctx, ino, cur, W_OK));
    }
    uint64_t gen = st->Gen();
    ASSIGN_OR_RETURN(Attr a, meta_->SetAttr(ctx, ino, mask, in));
    RETURN_IF_ERROR(st->Refresh(&a, gen).status());
    return a;
  }
  ASSIGN_OR_RETURN(Attr a, meta_->SetAttr(ctx, ino, mask, in));
  if (mask & (kSetAtime | kSetAtimeNow)) {
    // Set explicitly (touch -a, utimensat): an access time marked by an earlier read
    // must not overwrite it.
    auto st = State(ino);
    std::lock_guard<std::mutex> l(st->mu);
    st->pending_atime_ns = 0;
    st->TakeTimesLocked(a);
  }
  return MergePending(ino, a);
}

Result<Entry> Vfs::Mknod(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode, uint64_t rdev) {
  ASSIGN_OR_RETURN(auto r, meta_->Mknod(ctx, parent, name, mode, rdev));
  return Entry{r.first, r.second};
}

Result<Entry> Vfs::Mkdir(const Ctx& ctx, Ino parent, const std::string& name, uint32_t mode) {
  ASSIGN_OR_RETURN(auto r, meta_->Mkdir(ctx, parent, name, mode));
  return Entry{r.first, r.second};
}

Result<Entry> Vfs::Symlink(const Ctx& ctx, Ino parent, const std::string& name, const std::string& target) {
  ASSIGN_OR_RETURN(auto r, meta_->Symlink(ctx, parent, name, target));
  return Entry{r.first, r.second};
}

Result<std::string> Vfs::Readlink(Ino ino) { return meta_->Readlink(ino); }
Status Vfs::Unlink(const Ctx& ctx, Ino parent, const std::string& name) { return meta_->Unlink(ctx, parent, name); }
Status Vfs::Rmdir(const Ctx& ctx, Ino parent, const std::string& name) { return meta_->Rmdir(ctx, parent, name); }
Status Vfs::Rename(const Ctx& ctx, Ino parent, const std::string& name, Ino new_parent,
                   const std::string& new_name, uint32_t flags) {
  return meta_->Rename(ctx, parent, name, new_parent, new_name, flags);
}

Result<Entry> Vfs::Link(const Ctx& ctx, Ino ino, Ino new_parent, const std::string& new_name) {
  ASSIGN_OR_RETURN(Attr a, meta_->Link(ctx, ino, new_parent, new_name));
  return Entry{ino, MergePending(ino, a)};
}

Status Vfs::Access(const Ctx& ctx, Ino ino, int mask) { return meta_->Access(ctx, ino, mask); }

void Vfs::NoteKernelLookup(Ino ino) {
  std::lock_guard<std::mutex> l(kernel_mu_);
  kernel_lookups_[ino]++;
}

void Vfs::Forget(Ino ino, uint64_t nlookup) {
  bool last = false;
  {
    std::lock_guard<std::mutex> l(kernel_mu_);
    auto it = kernel_lookups_.find(ino);
    if (it != kernel_lookups_.end() && (it->second <= nlookup || nlookup == 0)) {
      kernel_lookups_.erase(it);
      last = true;
    } else if (it != kernel_lookups_.end()) {
      it->second -= nlookup;
    }
  }
  if (last) {
    Status s = meta_->Forgotten(ino);
    if (!s.ok()) spdlog::warn("deleting removed inode {} after its last lookup failed: {}", ino, s.ToString());
  }
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  bool busy;
  {
    std::lock_guard<std::mutex> g(it->second->mu);
    busy = InUse(*it->second);
  }
  // Handles hold their own reference, so erasing here is safe even if one is closing.
  if (!busy) inodes_.erase(it);
}

Result<OpenResult> Vfs::Open(const Ctx& ctx, Ino ino, int flags) { return OpenInode(ctx, ino, flags, nullptr); }

Result<OpenResult> Vfs::OpenInode(const Ctx& ctx, Ino ino, int flags, Attr* attr_out) {
  std::vector<SliceRecord> first_chunk;
  bool want_chunk = !(flags & O_TRUNC) && (flags & O_ACCMODE) != O_WRONLY;
  auto st = State(ino);
  bool cacheable = opts_.open_cache_ns > 0 && (flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC);
  if (cacheable) {
    std::optional<Attr> cached;
    uint64_t cgen = 0;
    {
      std::lock_guard<std::mutex> l(st->mu);
      if (st->open_attr && st->open_attr_gen == st->gen_locked() &&
          MonoNanos() - st->open_attr_ns < opts_.open_cache_ns && !(st->writer && st->writer->Dirty())) {
        cached = st->open_attr;
        cgen = st->gen_locked();
      }
    }
    if (cached) {
      Status ok = meta_->OpenWithAttr(ctx, ino, flags, *cached);
      if (ok.ok()) {
        cached_opens_++;
        auto r = OpenWithAttr(st, *cached, flags, cgen);
        if (!r.ok()) meta_->Release(ino).ok();
        if (r.ok()) r->atime_marked = NoteAccess(st);
        if (r.ok() && attr_out) *attr_out = MergePending(ino, *cached);
        return r;
      }
      if (ok.code() != EAGAIN) return ok;
    }
  }
  uint64_t gen = st->Gen();
  ASSIGN_OR_RETURN(Attr a, meta_->Open(ctx, ino, flags, want_chunk ? &first_chunk : nullptr));
  if (cacheable) {
    std::lock_guard<std::mutex> l(st->mu);
    if (st->gen_locked() == gen) {
      st->open_attr = a;
      st->open_attr_ns = MonoNanos();
      st->open_attr_gen = gen;
    }
  }
  if ((flags & O_TRUNC) && a.IsRegular()) {
    // libfuse asks the kernel for atomic O_TRUNC: the truncation is ours to do here.
    // Permission to write was checked by Meta::Open.
    Attr zero;
    Ctx as_root = Ctx::Root();
    as_root.outside_trash = ctx.outside_trash;
    auto t = SetAttr(as_root, ino, kSetSize, zero, /*fh=*/UINT64_MAX);  // through this open, no handle yet
    if (!t.ok()) {
      meta_->Release(ino).ok();
      return t.status();
    }
    a = *t;
    gen = st->Gen();
  }
  std::vector<ChunkSegment> first_map;
  bool with_map = want_chunk && a.IsRegular() && a.length > 0;
  if (with_map) first_map = BuildSliceMap(std::move(first_chunk));
  ASSIGN_OR_RETURN(OpenResult r, OpenWithAttr(st, a, flags, gen, with_map ? &first_map : nullptr));
  // The kernel may serve the reads from its page cache, out of our sight: the open counts.
  if ((flags & O_ACCMODE) == O_RDONLY && a.IsRegular()) r.atime_marked = NoteAccess(st);
  if (attr_out) *attr_out = MergePending(ino, a);  // with this client's buffered writes
  return r;
}

Result<OpenResult> Vfs::OpenWithAttr(const std::shared_ptr<InodeState>& st, const Attr& a, int flags,
                                     uint64_t gen, std::vector<ChunkSegment>* first_chunk) {
  auto h = std::make_shared<Handle>();
  h->ino = st->ino;
  h->flags = flags;
  h->state = st;
  h->reader = std::make_unique<FileReader>(st, store_);
  OpenResult r;
  {
    std::lock_guard<std::mutex> l(st->mu);
    bool dirty = st->writer && st->writer->Dirty();
    // Close-to-open: the kernel's page cache is dropped only when the file holds data
    // changes this client has not seen (another client's). Never for this client's own
    // changes: a buffered write marks its pages up to date before its WRITE reaches us,
    // and a reader that faulted a dropped page back in meanwhile would cache the old data
    // for good. While this client writes the file, it keeps its cache (writers on two
    // clients without a lock race anyway; with one, taking the lock revalidates).
    // `a` replaces the cached length only if it is current: this client did not change
    // the file while it was being read (then the state already holds something newer).
    const bool raced = st->gen_locked() != gen;
    bool unseen = st->RefreshLocked(&a, gen, InodeState::Cause::kOpen);
    r.keep_cache = !unseen || dirty;
    // The map read with `a` is as current as `a`, so it outlives the refresh that may have
    // dropped older maps (the first open after a mount always does), unless a commit of
    // this client's raced with the read. Not while writes are buffered: more cautious
    // than the cache's rule (the writer's commit would drop the map anyway).
    if (first_chunk && !raced && !dirty) st->KeepSegmentsLocked(0, std::move(*first_chunk), st->gen_locked());
    st->opens++;
  }
  r.fh = AddHandle(std::move(h));
  return r;
}

Result<std::pair<Entry, OpenResult>> Vfs::Create(const Ctx& ctx, Ino parent, const std::string& name,
                                                 uint32_t mode, int flags) {
  // The kernel sends CREATE when its lookup found no entry, but another client may have
  // created the name since. open(O_CREAT) without O_EXCL must then open that file, as on a
  // local file system; if that one is unlinked again before we look, try the create again.
  for (int attempt = 0;; attempt++) {
    auto made = Mknod(ctx, parent, name, (mode & 07777) | S_IFREG, 0);
    if (made.ok() || made.status().code() != EEXIST || (flags & O_EXCL)) {
      ASSIGN_OR_RETURN(Entry e, std::move(made));
      // The creator may write even if the new mode forbids it (open(O_CREAT|O_WRONLY, 0444)).
      meta_->OpenCreated(e.ino);
      // A new inode: nothing of this client's can have raced with reading its attributes.
      auto st = State(e.ino);
      ASSIGN_OR_RETURN(OpenResult r, OpenWithAttr(st, e.attr, flags, st->Gen()));
      {
        std::lock_guard<std::mutex> l(st->mu);
        st->no_caps_until_ns = MonoNanos() + kNegativeXattrNs;
      }
      return std::make_pair(e, r);
    }
    auto found = Lookup(ctx, parent, name);
    if (!found.ok() && found.status().code() == ENOENT && attempt < 8) continue;
    RETURN_IF_ERROR(found.status());
    Entry e = *found;
    if (e.attr.IsDir()) return Status::Err(EISDIR, name + " is a directory");
    if (!e.attr.IsRegular()) return Status::Err(EEXIST, name + " exists and is not a regular file");
    // Permission checks and O_TRUNC as for a plain open: the kernel takes the file as new
    // and will not truncate it itself. ESTALE: the file found was removed (and freed)
    // before it could be opened; the name may be free again, so create anew.
    auto r = OpenInode(ctx, e.ino, flags, &e.attr);
    if (!r.ok() && r.status().code() == ESTALE && attempt < 8) continue;
    RETURN_IF_ERROR(r.status());
    return std::make_pair(e, *r);
  }
}

Result<std::pair<Entry, OpenResult>> Vfs::Tmpfile(const Ctx& ctx, Ino parent, uint32_t mode, int flags) {
  ASSIGN_OR_RETURN(auto made, meta_->Tmpfile(ctx, parent, mode, !(flags & O_EXCL)));
  Entry e{made.first, made.second};
  auto st = State(e.ino);
  auto r = OpenWithAttr(st, e.attr, flags, st->Gen());
  if (!r.ok()) {
    meta_->Release(e.ino).ok();
    return r.status();
  }
  return std::make_pair(e, *r);
}

// SEEK_DATA / SEEK_HOLE granularity: the block st_blocks counts in (Meta's kAllocUnit).
constexpr uint64_t kSeekUnit = 4096;

Result<uint64_t> Vfs::Lseek(uint64_t fh, uint64_t off, int whence) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return Status::Err(EINVAL, "unsupported whence");
  InodeState& st = *h->state;
  RETURN_IF_ERROR(FlushInode(st));
  uint64_t length;
  {
    std::lock_guard<std::mutex> l(st.mu);
    length = st.length;
  }
  if (off >= length) return Status::Err(ENXIO, "offset at or past the end of the file");
  bool want_data = whence == SEEK_DATA;
  // Chunks without records are holes throughout: skip them without reading them.
  ASSIGN_OR_RETURN(auto with_records, st.ChunkList());
  for (uint64_t pos = off; pos < length;) {
    uint32_t idx = static_cast<uint32_t>(pos >> kChunkBits);
    uint64_t cstart = static_cast<uint64_t>(idx) * kChunkSize;
    uint64_t cend = std::min(length, cstart + kChunkSize);
    if (!std::binary_search(with_records.begin(), with_records.end(), idx)) {
      if (!want_data) return pos;
      auto next = std::upper_bound(with_records.begin(), with_records.end(), idx);
      if (next == with_records.end()) break;
      pos = static_cast<uint64_t>(*next) * kChunkSize;
      continue;
    }
    ASSIGN_OR_RETURN(auto segs, st.Segments(idx));
    // In 4 KiB blocks, as st_blocks counts (and ext4 answers): a block with data is data.
    uint64_t found = NextDataBlock(segs, pos - cstart, cend - cstart, want_data, kSeekUnit);
    if (found < cend - cstart) return cstart + found;
    pos = cend;
  }
  if (want_data) return Status::Err(ENXIO, "no data past the offset");
  return length;  // the implicit hole at the end
}

Result<size_t> Vfs::Read(uint64_t fh, uint64_t off, size_t size, char* buf, ReadPieces* pieces) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  if (!h->reader) return Status::Err(EISDIR, "a directory handle");
  InodeState& st = *h->state;
  // Read-your-writes: commit buffered writes of this inode first.
  {
    std::shared_ptr<FileWriter> w;
    {
      std::lock_guard<std::mutex> l(st.mu);
      w = st.writer;
    }
    if (w && w->Dirty()) RETURN_IF_ERROR(FlushInode(st));
  }
  uint64_t length;
  {
    std::lock_guard<std::mutex> l(st.mu);
    length = st.length;
  }
  if (off >= length) return size_t{0};
  size_t n = static_cast<size_t>(std::min<uint64_t>(size, length - off));
  RETURN_IF_ERROR(h->reader->Read(off, n, buf, pieces));
  NoteAccess(h->state);
  return n;
}

Status Vfs::Write(uint64_t fh, uint64_t off, const char* data, size_t size) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  if (opts_.read_only) return Status::Err(EROFS, "volume mounted read-only");
  InodeState& st = *h->state;
  std::shared_ptr<FileWriter> w = Writer(st);
  RETURN_IF_ERROR(w->Write(off, data, size));
  {
    std::lock_guard<std::mutex> g(mu_);
    dirty_.try_emplace(st.ino, h->state);
  }
  {
    // Cached slice maps stay valid until the writer commits (its hook drops them); reads
    // commit buffered writes first.
    std::lock_guard<std::mutex> l(st.mu);
    st.length = std::max(st.length, off + size);
  }
  // Backpressure: the store bounds the memory held by written-but-not-uploaded data. When
  // what is over its budget is not being uploaded, committing this inode releases it.
  if (!store_->WaitForBufferRoom()) RETURN_IF_ERROR(FlushInode(st));
  return Status::OK();
}

Status Vfs::Flush(uint64_t fh, uint64_t lock_owner) {
  auto usable = UsableHandle(fh);
  if (!usable.ok() && usable.status().code() == EBADF) return usable.status();
  auto h = GetHandle(fh);
  if (!h) return Status::Err(EBADF, "bad file handle");
  // close(2) of a fenced file reports the loss (its buffered writes were dropped).
  Status s = usable.ok() ? FlushInode(*h->state) : usable.status();
  bool owned;
  {
    std::lock_guard<std::mutex> l(h->state->mu);
    owned = lock_owner && h->state->record_lock_owners.erase(lock_owner) > 0;
  }
  if (owned) {
    // POSIX: closing any descriptor of the file drops every record lock the process holds on it.
    Status ls = meta_->ReleaseRecordLocks(h->ino, lock_owner);
    if (!ls.ok()) spdlog::warn("releasing record locks of inode {} failed: {}", h->ino, ls.ToString());
  }
  return s;
}

Status Vfs::Fsync(uint64_t fh) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  RETURN_IF_ERROR(FlushInode(*h->state));
  RETURN_IF_ERROR(store_->store()->Sync());
  return meta_->Sync();
}

Status Vfs::FsyncDir() { return meta_->Sync(); }

Status Vfs::Release(uint64_t fh) {
  std::shared_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return Status::Err(EBADF, "bad file handle");
    h = it->second;
    handles_.erase(it);
  }
  Status s = h->lost ? Status::OK() : FlushInode(*h->state);
  if (h->flocked) {
    // The last descriptor of an open file description is gone: its flock goes with it.
    Status ls = meta_->Flock(h->ino, fh, F_UNLCK);
    if (!ls.ok()) spdlog::warn("releasing flock of inode {} failed: {}", h->ino, ls.ToString());
  }
  // ... and so do its open file description locks. An owner that also locked through
  // another open handle keeps its locks until that one goes (the kernel reuses the id of
  // a closed file for the next open, whose locks then merge with the old ones).
  std::vector<uint64_t> ofd_owners;
  {
    std::lock_guard<std::mutex> l(h->state->mu);
    auto& owners = h->state->record_lock_owners;
    for (auto it = owners.begin(); it != owners.end();) {
      if (it->second.erase(fh) && it->second.empty()) {
        ofd_owners.push_back(it->first);
        it = owners.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (uint64_t owner : ofd_owners) {
    Status ls = meta_->ReleaseRecordLocks(h->ino, owner);
    if (!ls.ok()) spdlog::warn("releasing record locks of inode {} failed: {}", h->ino, ls.ToString());
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    std::lock_guard<std::mutex> g(h->state->mu);
    if (--h->state->opens == 0 && !(h->state->writer && h->state->writer->Dirty())) {
      h->state->writer.reset();
    }
  }
  Status r;
  bool held;
  {
    // Under kernel_mu_ (Meta keeps a held inode without a transaction): a FORGET that
    // drops the last lookup comes after Meta noted the inode as held, and deletes it.
    std::lock_guard<std::mutex> l(kernel_mu_);
    held = kernel_lookups_.count(h->ino) > 0;
    if (held) r = meta_->Release(h->ino, /*kernel_holds=*/true);
  }
  if (!held) {
    r = meta_->Release(h->ino);
    ParkIdle(h->ino);
  }
  return s.ok() ? r : s;
}

size_t Vfs::inode_states() {
  std::lock_guard<std::mutex> l(mu_);
  return inodes_.size();
}

void Vfs::ParkIdle(Ino ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto pos = idle_pos_.find(ino);
  if (pos != idle_pos_.end()) idle_.erase(pos->second);
  idle_.push_front(ino);
  idle_pos_[ino] = idle_.begin();
  // Busy states go back to the front; each is looked at once at most.
  for (size_t looked = 0; idle_.size() > kIdleStates && looked < idle_.size(); ++looked) {
    Ino old = idle_.back();
    auto it = inodes_.find(old);
    bool busy = false;
    if (it != inodes_.end()) {
      std::lock_guard<std::mutex> g(it->second->mu);
      busy = InUse(*it->second);
    }
    idle_.pop_back();
    if (busy) {
      idle_.push_front(old);
      idle_pos_[old] = idle_.begin();
      continue;
    }
    idle_pos_.erase(old);
    // Handles hold their own reference, so erasing here is safe even if one is closing.
    if (it != inodes_.end()) inodes_.erase(it);
  }
}

Status Vfs::Fallocate(const Ctx& ctx, uint64_t fh, int mode, uint64_t off, uint64_t len) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  if ((h->flags & O_ACCMODE) == O_RDONLY) return Status::Err(EBADF, "file not open for writing");
  RETURN_IF_ERROR(FlushInode(*h->state));
  if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
    // The room df shows (a local bucket's disk) bounds what may be reserved, as Meta's own
    // check does for the volume's capacity.
    ASSIGN_OR_RETURN(StatFs fs, GetStatFs(h->ino));
    if (!fs.capacity_limited && fs.available_bytes && len > *fs.available_bytes) {
      return Status::Err(ENOSPC, "fallocate of " + std::to_string(len) + " bytes: the bucket's disk has " +
                                     std::to_string(*fs.available_bytes) + " free");
    }
  }
  RETURN_IF_ERROR(meta_->Fallocate(ctx, h->ino, mode, off, len));
  return h->state->Refresh().status();
}

Result<uint64_t> Vfs::CopyFileRange(const Ctx& ctx, uint64_t fh_in, uint64_t off_in, uint64_t fh_out,
                                    uint64_t off_out, uint64_t len) {
  ASSIGN_OR_RETURN(auto hi, UsableHandle(fh_in));
  ASSIGN_OR_RETURN(auto ho, UsableHandle(fh_out));
  if ((ho->flags & O_ACCMODE) == O_RDONLY) return Status::Err(EBADF, "destination not open for writing");
  RETURN_IF_ERROR(FlushInode(*hi->state));
  RETURN_IF_ERROR(FlushInode(*ho->state));
  ASSIGN_OR_RETURN(uint64_t n, meta_->CopyFileRange(ctx, hi->ino, off_in, ho->ino, off_out, len));
  RETURN_IF_ERROR(ho->state->Refresh().status());
  return n;
}

Result<StatFs> Vfs::GetStatFs(Ino ino) {
  ASSIGN_OR_RETURN(StatFs fs, meta_->GetStatFs(ino));
  if (fs.capacity_limited) return fs;
  // Without a limit, a store that knows its room (a bucket directory: its disk) is the
  // size and free space shown; the used bytes stay the volume's own.
  if (auto space = store_->store()->Space()) {
    fs.capacity_bytes = space->total_bytes;
    fs.available_bytes = space->free_bytes;
  }
  return fs;
}




}  // namespace tierfs
