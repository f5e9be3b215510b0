// What the kernel settles before a mount hears of a call, for PathClient, which has no
// kernel in front of it: the order in which Linux reports errors (a name's existence before
// the permission to make or remove it, a directory moved into itself before permissions,
// ...), so that the SDK raises what os.* raises on a local directory or a mount.
// tests/test_sdk_files.py compares them call by call.
#include <fcntl.h>
#include <unistd.h>

#include "sdk/path_client.h"
#include "vfs/vfs.h"

namespace tierfs::sdk {

bool PathClient::Denied(const Status& st) {
  return st.code() == EACCES || st.code() == EPERM || st.code() == EROFS;
}

Status PathClient::NewName(Ino parent, const std::string& name, const std::string& path, bool check) {
  if (!check && !Slashed(path)) return Status::OK();  // the call's own EEXIST comes first
  auto e = volume_->vfs()->Lookup(ctx_, parent, name);
  if (e.ok()) return Status::Err(EEXIST, path + ": exists");
  if (e.status().code() != ENOENT) return On(e.status(), path);
  if (Slashed(path)) return Status::Err(ENOENT, path + ": a new name with a trailing slash names no directory");
  return Status::OK();
}

Status PathClient::ExistsFirst(Ino parent, const std::string& name, const std::string& path, Status st) {
  if (Denied(st)) {
    if (volume_->vfs()->Lookup(ctx_, parent, name).ok()) return Status::Err(EEXIST, path + ": exists");
  }
  return On(st, path);
}

Status PathClient::MissingFirst(Ino parent, const std::string& name, const std::string& path, Status st) {
  if (Denied(st)) {
    auto e = volume_->vfs()->Lookup(ctx_, parent, name);
    if (!e.ok() && e.status().code() == ENOENT) return On(e.status(), path);
  }
  return On(st, path);
}

bool PathClient::Holds(Ino dir, Ino ino) {
  Vfs* vfs = volume_->vfs();
  Ino cur = ino;
  for (int depth = 0; depth < 4096; ++depth) {
    if (cur == dir) return true;
    if (cur == volume_->root()) return false;
    auto up = vfs->Lookup(ctx_, cur, "..");
    if (!up.ok()) return false;
    cur = up->ino;
  }
  return false;
}

Status PathClient::RenameError(Ino p1, const std::string& n1, Ino p2, const std::string& n2,
                               const std::string& what, Status st) {
  // rename(2)'s order: both names looked up (the source must exist), a directory moved
  // under itself (EINVAL), onto a directory that holds the source (ENOTEMPTY), the same
  // file under both names (nothing to do: success), then the permissions to remove and to
  // add a name (EACCES), and only then the types and emptiness the mount itself checks.
  Vfs* vfs = volume_->vfs();
  auto src = vfs->Lookup(ctx_, p1, n1);
  if (!src.ok()) return On(src.status(), what);
  auto dst = vfs->Lookup(ctx_, p2, n2);
  if (src->attr.IsDir() && Holds(src->ino, p2)) {
    return Status::Err(EINVAL, what + ": cannot move a directory into itself");
  }
  if (dst.ok() && Holds(dst->ino, p1)) return Status::Err(ENOTEMPTY, what + ": not empty (it holds the source)");
  if (dst.ok() && dst->ino == src->ino) return Status::OK();
  if (!Denied(st)) {
    for (Ino dir : {p1, p2}) {
      Status w = vfs->Access(ctx_, dir, W_OK | X_OK);
      if (Denied(w)) return On(w, what);
    }
  }
  return On(st, what);
}

}  // namespace tierfs::sdk
