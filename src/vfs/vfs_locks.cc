// The vfs's advisory locks: flock per open file description (handle), POSIX and OFD
// record locks per owner, all held in the metadata engine so they exclude across clients.
#include <fcntl.h>
#include <sys/file.h>

#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

// Locks order access between clients: data written under a lock is committed before the
// lock is let go, and a client taking a lock forgets what it cached of the file, so the
// next holder sees the previous holder's writes (what NFS users rely on).
Status Vfs::BeforeUnlock(Handle& h) { return FlushInode(*h.state); }

Status Vfs::AfterLock(Handle& h, bool* changed) {
  ASSIGN_OR_RETURN(bool unseen, h.state->Refresh());
  if (changed) *changed = unseen;
  return Status::OK();
}

// A flock belongs to an open file description, which is what a handle stands for, so the
// handle names the owner. Not the kernel's owner id: that is the address of the kernel's
// file object, reused as soon as the file is closed, while the RELEASE that drops the old
// flock may still be on its way and would then drop the new holder's lock.
Status Vfs::Flock(uint64_t fh, int op, bool* changed) {
  int type = (op & LOCK_UN) ? F_UNLCK : (op & LOCK_EX) ? F_WRLCK : F_RDLCK;
  auto usable = UsableHandle(fh);
  // Unlocking a fenced file succeeds: its lock is gone already.
  if (!usable.ok()) return type == F_UNLCK && usable.status().code() == EIO ? Status::OK() : usable.status();
  auto h = *usable;
  if (type == F_UNLCK) RETURN_IF_ERROR(BeforeUnlock(*h));
  RETURN_IF_ERROR(meta_->Flock(h->ino, fh, type));
  if (type == F_UNLCK) return Status::OK();
  h->flocked = true;
  return AfterLock(*h, changed);
}

Result<Meta::LockRange> Vfs::GetLk(uint64_t fh, uint64_t owner, Meta::LockRange want) {
  ASSIGN_OR_RETURN(auto h, UsableHandle(fh));
  return meta_->GetLk(h->ino, owner, want);
}

Status Vfs::SetLk(uint64_t fh, uint64_t owner, Meta::LockRange want, bool* changed) {
  auto usable = UsableHandle(fh);
  if (!usable.ok()) return want.type == F_UNLCK && usable.status().code() == EIO ? Status::OK() : usable.status();
  auto h = *usable;
  if (want.type == F_UNLCK) RETURN_IF_ERROR(BeforeUnlock(*h));
  RETURN_IF_ERROR(meta_->SetLk(h->ino, owner, want));
  if (want.type == F_UNLCK) return Status::OK();
  {
    std::lock_guard<std::mutex> l(h->state->mu);
    h->state->record_lock_owners[owner].insert(fh);
  }
  return AfterLock(*h, changed);
}

}  // namespace tierfs
