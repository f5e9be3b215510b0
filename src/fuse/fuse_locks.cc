// Advisory lock requests: flock, and POSIX / OFD record locks (getlk, setlk). A request
// that cannot be granted at once and may block waits on a thread of its own.
#include <spdlog/spdlog.h>
#include <sys/file.h>

#include <functional>

#include "fuse/fuse_internal.h"

namespace tierfs::fuse_internal {

// Waits for a blocking lock by retrying; an interrupted request (signal) returns EINTR, and
// so does the end of the session.
// One try at a lock; *changed: the file holds data changes this client had not seen.
using LockAttempt = std::function<Status(bool* changed)>;

static Status RetryUntilGranted(fuse_req_t req, const LockAttempt& try_lock, const LockWaiters& w, bool* changed) {
  int delay_ms = 1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    delay_ms = std::min(delay_ms * 2, 50);
    Status st = try_lock(changed);
    if (st.code() != EAGAIN) return st;
    if (fuse_req_interrupted(req)) return Status::Err(EINTR, "interrupted while waiting for a lock");
    if (w.stopping) return Status::Err(EINTR, "file system unmounted while waiting for a lock");
  }
}

// Locks are how applications on different hosts take turns on a file, so taking one
// revalidates what the kernel caches for the inode, as NFS does: its attributes always
// (the size, for O_APPEND and SEEK_END), its pages when another client changed the data.
// Not this client's own pages: a buffered write marks them up to date before its WRITE
// reaches us, and a reader that faulted a dropped page back in meanwhile would cache the
// old data for good. Sent before the reply, so the locker's next call already sees the
// other clients' committed writes.
static void RevalidateAfterLock(fuse_req_t req, fuse_ino_t ino, const Status& st, bool unlock, bool changed) {
  if (!st.ok() || unlock) return;
  fuse_session* se = static_cast<Ctxt*>(fuse_req_userdata(req))->se;
  if (se) fuse_lowlevel_notify_inval_inode(se, ino, changed ? 0 : -1, 0);
}

static void ReplyLock(fuse_req_t req, fuse_ino_t ino, const Status& st, bool unlock, bool flock, bool changed) {
  if (flock && st.code() == EAGAIN) return ReplyErr(req, EWOULDBLOCK);
  RevalidateAfterLock(req, ino, st, unlock, changed);
  Reply(req, st);
}

// Tries once; a blocking request that must wait goes on to a waiter thread, which replies.
static void LockOrWait(fuse_req_t req, fuse_ino_t ino, LockAttempt attempt, bool blocking, bool unlock, bool flock) {
  bool changed = false;
  Status st = attempt(&changed);
  if (st.code() != EAGAIN || !blocking) return ReplyLock(req, ino, st, unlock, flock, changed);
  LockWaiters* w = &static_cast<Ctxt*>(fuse_req_userdata(req))->waiters;
  w->Spawn([=, attempt = std::move(attempt)] {
    bool changed = false;
    Status r = RetryUntilGranted(req, attempt, *w, &changed);
    ReplyLock(req, ino, r, unlock, flock, changed);
  });
}

void OpFlock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op) {
  OpTimer timer(kOpLock, req, ino);
  int base = op & (LOCK_SH | LOCK_EX | LOCK_UN);
  Vfs* vfs = V(req);
  uint64_t fh = fi->fh;
  LockOrWait(req, ino, [=](bool* changed) { return vfs->Flock(fh, base, changed); }, !(op & LOCK_NB), base & LOCK_UN,
             true);
}

static Meta::LockRange ToRange(const struct flock* l) {
  Meta::LockRange r;
  r.type = l->l_type;
  r.start = static_cast<uint64_t>(l->l_start);
  r.end = l->l_len == 0 ? UINT64_MAX : static_cast<uint64_t>(l->l_start + l->l_len - 1);
  r.pid = static_cast<uint32_t>(l->l_pid);
  return r;
}

void OpGetlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  OpTimer timer(kOpLock, req, ino);
  auto r = V(req)->GetLk(fi->fh, fi->lock_owner, ToRange(lock));
  if (!r.ok()) return Reply(req, r.status());
  struct flock out = *lock;
  out.l_type = static_cast<short>(r->type);
  if (r->type != F_UNLCK) {
    out.l_start = static_cast<off_t>(r->start);
    out.l_len = r->end == UINT64_MAX ? 0 : static_cast<off_t>(r->end - r->start + 1);
    out.l_pid = static_cast<pid_t>(r->pid);
  }
  fuse_reply_lock(req, &out);
}

void OpSetlk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  OpTimer timer(kOpLock, req, ino);
  Meta::LockRange want = ToRange(lock);
  want.pid = fuse_req_ctx(req)->pid;
  Vfs* vfs = V(req);
  uint64_t fh = fi->fh, owner = fi->lock_owner;
  LockOrWait(req, ino, [=](bool* changed) { return vfs->SetLk(fh, owner, want, changed); }, sleep != 0,
             want.type == F_UNLCK, false);
}

}  // namespace tierfs::fuse_internal
