// What the kernel does to a file's set-user-ID and set-group-ID bits when a mount writes,
// truncates or chowns it (file_remove_privs, notify_change's ATTR_KILL_SUID/SGID), done
// for PathClient, which has no kernel in front of it. Without it a user without
// privileges could change a set-user-ID program it may write and leave it set-user-ID
// (found by tests/sdk_permission_calls.py with set-ID modes: the SDK kept 06775 where
// Linux left 0775).
//
// Rules, as Linux's: a write, a truncation or an open with O_TRUNC by a caller other than
// root (who holds CAP_FSETID) drops S_ISUID, and S_ISGID when the group may execute (a
// set-group-ID file without group execute is a mandatory-locking mark and keeps it); a
// change of owner or group drops them whoever asks. Directories keep theirs. The mode is
// changed as root, since the writer need not own the file.
#include <sys/stat.h>

#include "sdk/path_client.h"
#include "vfs/vfs.h"

namespace tierfs::sdk {

Status PathClient::KillPriv(Ino ino, bool owner_changed, const Attr* known) {
  if (!owner_changed && ctx_.uid == 0) return Status::OK();
  if (known != nullptr && (!known->IsRegular() || (known->mode & (S_ISUID | S_ISGID)) == 0)) return Status::OK();
  Vfs* vfs = volume_->vfs();
  ASSIGN_OR_RETURN(Attr a, vfs->GetAttr(ino));
  if (!a.IsRegular()) return Status::OK();
  uint32_t kill = S_ISUID;
  if ((a.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) kill |= S_ISGID;
  if ((a.mode & kill) == 0) return Status::OK();
  Attr m;
  m.mode = a.mode & 07777 & ~kill;
  Ctx root = ctx_;
  root.uid = 0;
  root.gid = 0;
  root.load_groups = nullptr;
  return vfs->SetAttr(root, ino, kSetMode, m, 0).status();
}

Ino PathClient::TakeKillOnWrite(uint64_t fh) {
  std::lock_guard<std::mutex> l(kill_mu_);
  auto it = kill_on_write_.find(fh);
  if (it == kill_on_write_.end()) return 0;
  Ino ino = it->second;
  kill_on_write_.erase(it);
  return ino;
}

void PathClient::KillOnWrite(uint64_t fh, Ino ino, const Attr& a) {
  if (ctx_.uid == 0 || !a.IsRegular() || (a.mode & (S_ISUID | S_ISGID)) == 0) return;
  std::lock_guard<std::mutex> l(kill_mu_);
  kill_on_write_[fh] = ino;
}

}  // namespace tierfs::sdk
