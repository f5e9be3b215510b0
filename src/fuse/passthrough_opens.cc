#include "fuse/passthrough_opens.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>

#include "fuse/kernel_passthrough.h"
#include "metrics/metrics.h"

namespace tierfs::fuse_internal {
namespace {

metrics::Counter& Opens(const char* mode) {
  return metrics::Default().GetCounter("tierfs_passthrough_opens_total",
                                       "File opens answered in each kernel io mode (passthrough: the kernel "
                                       "reads a verified flat copy; cached: reads come to TierFS)",
                                       {{"mode", mode}});
}

}  // namespace

PassthroughOpens::PassthroughOpens(int dev_fd) : PassthroughOpens(dev_fd, Backing{BackingOpen, BackingClose}) {}

bool PassthroughOpens::TryBeginCached(Ino ino) {
  if (!tracking_) return true;
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it != inodes_.end() && it->second.passthrough > 0) return false;
  inodes_[ino].cached++;
  static metrics::Counter& cached = Opens("cached");
  cached.Add();
  return true;
}

bool PassthroughOpens::WaitBeginCached(Ino ino) {
  {
    std::unique_lock<std::mutex> l(mu_);
    bool ended = cv_.wait_for(l, kConflictWait, [&] {
      auto it = inodes_.find(ino);
      return it == inodes_.end() || it->second.passthrough == 0;
    });
    if (ended) {
      inodes_[ino].cached++;
      static metrics::Counter& cached = Opens("cached");
      cached.Add();
      return true;
    }
  }
  static metrics::Counter& conflicts = metrics::Default().GetCounter(
      "tierfs_passthrough_conflicts_total",
      "Opens refused (ETXTBSY) because the file was open through passthrough on this host");
  conflicts.Add();
  spdlog::warn("open of inode {} refused (ETXTBSY): it is being read through FUSE passthrough on this host "
               "(`mount --no-passthrough` turns that off)",
               ino);
  return false;
}

int PassthroughOpens::BeginPassthrough(Ino ino, uint64_t fh, const std::string& name, const std::string& path) {
  if (!enabled_) return 0;
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it != inodes_.end()) {
    Modes& m = it->second;
    if (m.cached > 0) return 0;
    if (m.passthrough > 0) {
      if (m.name != name) return 0;
      m.passthrough++;
      passthrough_handles_[fh] = ino;
      static metrics::Counter& pt = Opens("passthrough");
      pt.Add();
      return m.backing_id;
    }
  }
  if (path.empty()) return 0;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;  // evicted meanwhile
  int id = backing_.open(dev_fd_, fd);
  close(fd);
  if (id <= 0) {
    // Not negotiated, not allowed (CAP_SYS_ADMIN), or a backing file the kernel refuses
    // (on a stacked file system): the mount falls back for good.
    spdlog::warn("FUSE passthrough off for this mount: the kernel refused a backing file: {}", strerror(-id));
    enabled_ = false;
    return 0;
  }
  Modes& m = inodes_[ino];
  m.passthrough = 1;
  m.backing_id = id;
  m.name = name;
  passthrough_handles_[fh] = ino;
  static metrics::Counter& pt = Opens("passthrough");
  pt.Add();
  return id;
}

void PassthroughOpens::End(Ino ino, uint64_t fh) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;  // opened while passthrough was off
  Modes& m = it->second;
  auto h = passthrough_handles_.find(fh);
  if (h != passthrough_handles_.end()) {
    passthrough_handles_.erase(h);
    if (--m.passthrough == 0) {
      backing_.close(dev_fd_, m.backing_id);
      m.backing_id = 0;
      m.name.clear();
      cv_.notify_all();
    }
  } else if (m.cached > 0) {
    m.cached--;
  }
  if (m.cached == 0 && m.passthrough == 0) inodes_.erase(it);
}

}  // namespace tierfs::fuse_internal
