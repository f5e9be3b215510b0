// Access times of regular files (mount -o relatime, the default; -o strictatime;
// -o noatime; directories keep theirs, as with nodiratime: a listing of a directory that
// others create files in would otherwise contend with them for its attributes). A read
// that reaches TierFS, or an open for reading, marks the inode's atime by the mount's rule,
// judged on the times this client last saw (no engine request on the read's path); the
// flusher thread writes the marks in batches (Meta::TouchAtimes, a transaction per 256
// inodes, every half second) and Meta judges each again on what the engine holds. Until
// then GetAttr shows the marked time (MergePending). Under relatime an inode gets at most
// one atime write per change of it and per day, so a read-heavy workload pays one batched
// write per file per day, not one per read.
//
// Reads the kernel serves from its page cache never reach TierFS: that is why an open for
// reading counts as an access too (the kernel keeps a file's pages across opens when
// nothing changed it).
#include <algorithm>

#include "common/clock.h"
#include "vfs/inode_state.h"
#include "vfs/vfs.h"

namespace tierfs {

bool Vfs::NoteAccess(const std::shared_ptr<InodeState>& st) {
  if (opts_.atime == AtimeMode::kNone || opts_.read_only) return false;
  const int64_t now = NowNanos();
  {
    std::lock_guard<std::mutex> l(st->mu);
    if (!st->times_known) return false;  // nothing to judge by (an open fills them)
    const int64_t atime = std::max(st->atime_ns, st->pending_atime_ns);
    if (!AtimeDue(opts_.atime, atime, st->mtime_ns, st->ctime_ns, now)) return false;
    st->pending_atime_ns = now;
    if (st->atime_queued) return true;
    st->atime_queued = true;
  }
  std::lock_guard<std::mutex> l(atime_mu_);
  atime_queue_.push_back(st);
  return true;
}

Status Vfs::FlushAtimes() {
  std::vector<std::shared_ptr<InodeState>> due;
  {
    std::lock_guard<std::mutex> l(atime_mu_);
    due.swap(atime_queue_);
  }
  if (due.empty()) return Status::OK();
  std::vector<std::pair<Ino, int64_t>> reads;
  reads.reserve(due.size());
  for (auto& st : due) {
    std::lock_guard<std::mutex> l(st->mu);
    st->atime_queued = false;  // a read from now on queues it again
    if (st->pending_atime_ns) reads.emplace_back(st->ino, st->pending_atime_ns);
  }
  Status s = meta_->TouchAtimes(reads, opts_.atime);
  if (!s.ok()) {
    // Not lost: they stay marked and go with the next batch.
    std::lock_guard<std::mutex> l(atime_mu_);
    for (auto& st : due) {
      std::lock_guard<std::mutex> g(st->mu);
      if (st->pending_atime_ns && !st->atime_queued) {
        st->atime_queued = true;
        atime_queue_.push_back(st);
      }
    }
    return s;
  }
  size_t i = 0;
  for (auto& st : due) {
    std::lock_guard<std::mutex> l(st->mu);
    if (i < reads.size() && reads[i].first == st->ino) {
      const int64_t written = reads[i++].second;
      st->atime_ns = std::max(st->atime_ns, written);
      if (st->pending_atime_ns == written) st->pending_atime_ns = 0;  // else a later read marked it again
    }
  }
  return Status::OK();
}

}  // namespace tierfs
