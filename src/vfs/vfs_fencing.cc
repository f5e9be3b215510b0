// Fencing: what the vfs does when this client's session was ended by another client (it was
// silent for the session timeout: stopped, partitioned, starved) and Meta registered a new
// one (meta_liveness.cc). The other client has dropped this client's locks, and freed the
// files it held open after their unlink. Handles that depended on either are fenced: EIO
// for every further use (as an NFS client answers after losing its lock state), so that a
// process never reads zeros where its data was, nor writes under a lock somebody else may
// hold by now. Everything else goes on in the new session.
#include <spdlog/spdlog.h>

#include <set>

#include "vfs/file_writer.h"
#include "vfs/vfs.h"
#include "vfs/vfs_internal.h"

namespace tierfs {

namespace {
Status Fenced(Ino ino) {
  return Status::Err(EIO, "inode " + std::to_string(ino) +
                              ": this open file was fenced when the client's session was ended by another client "
                              "(its locks were lost, or its data freed); close it and open the file again");
}
}  // namespace

Result<std::shared_ptr<Handle>> Vfs::UsableHandle(uint64_t fh) {
  auto h = GetHandle(fh);
  if (!h) return Status::Err(EBADF, "bad file handle");
  // Past the lease, look before acting: a loss not noticed yet is handled (and this handle
  // fenced) before the operation runs. Cheap while the heartbeat is on time.
  if (!meta_->LeaseFresh()) {
    Status st = meta_->CheckSession();
    if (!st.ok()) spdlog::debug("checking the session before an operation: {}", st.ToString());
  }
  if (h->lost.load()) return Fenced(h->ino);
  return h;
}

void Vfs::SetPageInvalidator(std::function<void(Ino)> fn) {
  std::lock_guard<std::mutex> l(invalidator_mu_);
  invalidate_pages_ = std::move(fn);
}

void Vfs::OnSessionLost(const SessionLoss& loss) {
  std::vector<std::pair<uint64_t, std::shared_ptr<Handle>>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [fh, h] : handles_) all.emplace_back(fh, h);
  }
  std::set<Ino> fenced;
  uint64_t lock_handles = 0, gone_handles = 0, handles = 0;
  for (auto& [fh, h] : all) {
    if (h->is_dir || !h->state) continue;
    bool locked = h->flocked;
    {
      std::lock_guard<std::mutex> l(h->state->mu);
      for (const auto& [owner, fhs] : h->state->record_lock_owners) locked = locked || fhs.count(fh) > 0;
    }
    bool gone = loss.sustained.count(h->ino) > 0;
    if (!locked && !gone) continue;
    h->lost = true;
    handles++;
    h->flocked = false;
    lock_handles += locked;
    gone_handles += gone;
    fenced.insert(h->ino);
  }
  std::string inos;
  for (Ino ino : fenced) {
    std::shared_ptr<InodeState> st;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = inodes_.find(ino);
      if (it != inodes_.end()) st = it->second;
    }
    if (!st) continue;
    std::shared_ptr<FileWriter> w;
    {
      std::lock_guard<std::mutex> l(st->mu);
      w = st->writer;
      // The engine has no record of these locks any more.
      st->record_lock_owners.clear();
    }
    if (w) w->Discard();
    {
      std::lock_guard<std::mutex> l(st->mu);
      st->RefreshLocked(nullptr, 0, InodeState::Cause::kChange);
    }
    if (inos.size() < 2000) inos += (inos.empty() ? "" : ", ") + std::to_string(ino);
  }
  {
    std::lock_guard<std::mutex> l(invalidator_mu_);
    if (invalidate_pages_) {
      for (Ino ino : fenced) invalidate_pages_(ino);
    }
  }
  fenced_handles_ += handles;
  if (!fenced.empty()) {
    spdlog::error("session {} lost: fenced {} open file(s) that held locks and {} open file(s) unlinked earlier "
                  "(inodes {}); they fail with EIO until closed",
                  loss.old_sid, lock_handles, gone_handles, inos);
  }
  Status up = meta_->UpdateSession([&](SessionInfo& s) { s.lost_locks = lock_handles; });
  if (!up.ok()) spdlog::warn("recording the lost locks in session {} failed: {}", loss.new_sid, up.ToString());
}

}  // namespace tierfs
