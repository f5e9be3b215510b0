// Directory handles: opendir, the snapshot a listing reads from, releasedir.
//
// A listing of N entries costs O(N) in total, whatever the number of READDIR requests it
// takes: each request visits the snapshot from its offset only until the reply is full
// (Vfs::DirFiller says so), nothing is copied out of the snapshot, and with readdirplus the
// attributes are read for a window of entries at a time (one read transaction per
// kAttrWindow entries), not all up front and not one transaction per entry. Counted in
// tierfs_readdir_entries_total{step="snapshot"}.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "metrics/metrics.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

namespace {
// Entries whose attributes one read transaction loads for readdirplus.
constexpr size_t kAttrWindow = 512;

metrics::Counter& TakenFromSnapshots() {
  static metrics::Counter& c = metrics::Default().GetCounter(
      "tierfs_readdir_entries_total", "Directory entries taken from directory snapshots and encoded into READDIR replies",
      {{"step", "snapshot"}});
  return c;
}
}  // namespace

Result<uint64_t> Vfs::Opendir(const Ctx& ctx, Ino ino) {
  // Counted as open, so that a directory removed (rmdir, or replaced by a rename) while
  // open here stays until Releasedir, as an unlinked open file does: fstat works on it.
  ASSIGN_OR_RETURN(Attr a, meta_->Open(ctx, ino, O_RDONLY));
  if (!a.IsDir()) {
    meta_->Release(ino).ok();
    return Status::Err(ENOTDIR, "not a directory");
  }
  auto h = std::make_shared<Handle>();
  h->ino = ino;
  h->is_dir = true;
  h->state = State(ino);
  return AddHandle(std::move(h));
}

Status Vfs::Readdir(const Ctx& ctx, uint64_t fh, uint64_t off, bool plus, const DirFiller& fill) {
  auto h = GetHandle(fh);
  if (!h || !h->is_dir) return Status::Err(EBADF, "bad directory handle");
  std::lock_guard<std::mutex> l(h->dir_mu);
  // The snapshot is taken at the first read from offset 0 (and again on rewinddir), so the
  // offsets handed out stay valid while entries are added and removed.
  if (!h->have_snapshot || off == 0) {
    ASSIGN_OR_RETURN(auto entries, meta_->Readdir(ctx, h->ino, false));
    ASSIGN_OR_RETURN(Attr self, meta_->GetAttr(h->ino));
    h->entries.clear();
    h->entries.reserve(entries.size() + 2);
    DirEntry dot;
    dot.name = ".";
    dot.ino = h->ino;
    dot.type = S_IFDIR;
    dot.attr = self;
    DirEntry dotdot;
    dotdot.name = "..";
    dotdot.ino = h->ino == opts_.root ? h->ino : (self.parent ? self.parent : kRootIno);
    dotdot.type = S_IFDIR;
    h->entries.push_back(std::move(dot));
    h->entries.push_back(std::move(dotdot));
    for (auto& e : entries) h->entries.push_back(std::move(e));
    h->have_snapshot = true;
    h->attrs_until = 2;  // "." has its attributes; ".." is read when listed
  }
  // Buffered writes change a file's length and st_blocks: merged for the files this client
  // has written and not committed (usually none: then no lock per entry).
  bool merge = false;
  if (plus) {
    std::lock_guard<std::mutex> g(mu_);
    merge = !dirty_.empty();
  }
  for (uint64_t i = off; i < h->entries.size(); ++i) {
    TakenFromSnapshots().Add();
    DirEntry& e = h->entries[i];
    if (plus && i >= h->attrs_until) {
      size_t to = std::min(h->entries.size(), static_cast<size_t>(i) + kAttrWindow);
      RETURN_IF_ERROR(meta_->FillAttrs(&h->entries[i], to - i));
      h->attrs_until = to;
    }
    if (plus && i == 1) {
      auto pa = meta_->GetAttr(e.ino);
      if (pa.ok()) e.attr = *pa;
    }
    bool more;
    if (merge && i >= 2) {
      DirEntry merged = e;
      merged.attr = MergePending(e.ino, e.attr);
      more = fill(merged, i + 1);
    } else {
      more = fill(e, i + 1);
    }
    if (!more) break;
  }
  return Status::OK();
}

Status Vfs::Releasedir(uint64_t fh) {
  Ino ino;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return Status::Err(EBADF, "bad directory handle");
    ino = it->second->ino;
    handles_.erase(it);
  }
  return meta_->Release(ino);
}

}  // namespace tierfs
