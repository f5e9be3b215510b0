#define FUSE_USE_VERSION 312
#include "fuse/remote_invalidation.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fuse/fuse_internal.h"
#include "fuse/raw_notify.h"
#include "meta/change_watch.h"
#include "meta/kv_engine.h"
#include "metrics/metrics.h"

namespace tierfs {

namespace {
constexpr size_t kMaxQueued = 65536;
}  // namespace

struct RemoteInvalidation::Notifier {
  int fd = -1;
  uint64_t root = 1;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<MetaChange> queue;  // guarded by mu
  bool stopping = false;         // guarded by mu
  uint64_t dropped = 0;          // guarded by mu

  ~Notifier() {
    if (fd >= 0) close(fd);
  }

  void Push(const std::vector<MetaChange>& changes) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& c : changes) {
      if (queue.size() >= kMaxQueued) {
        ++dropped;
        continue;
      }
      queue.push_back(c);
    }
    cv.notify_one();
  }

  // The kernel's inode for a volume inode (the mount's root is FUSE_ROOT_ID).
  uint64_t KernelIno(uint64_t ino) const { return fuse_internal::InoOut(root, ino); }

  void Send(const MetaChange& c) {
    int rc = c.kind == MetaChange::kAttr ? NotifyInvalAttrs(fd, KernelIno(c.ino))
                                         : NotifyInvalEntry(fd, KernelIno(c.parent), c.name);
    // ENOENT: the kernel does not hold that inode or name, the common case.
    if (rc < 0 && rc != -ENOENT) spdlog::debug("remote invalidation: {}", strerror(-rc));
    static metrics::Counter& attrs = metrics::Default().GetCounter(
        "tierfs_remote_invalidations_total", "Kernel cache entries dropped for other clients' changes",
        {{"kind", "attr"}});
    static metrics::Counter& entries = metrics::Default().GetCounter(
        "tierfs_remote_invalidations_total", "Kernel cache entries dropped for other clients' changes",
        {{"kind", "entry"}});
    (c.kind == MetaChange::kAttr ? attrs : entries).Add();
  }

  void Loop() {
    pthread_setname_np(pthread_self(), "fuse-remote-inv");
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      MetaChange c = std::move(queue.front());
      queue.pop_front();
      l.unlock();
      Send(c);
      l.lock();
    }
  }
};

std::unique_ptr<RemoteInvalidation> RemoteInvalidation::Start(KvEngine* engine, fuse_session* se, uint64_t root) {
  auto n = std::make_shared<Notifier>();
  n->root = root;
  n->fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 0);
  if (n->fd < 0) {
    spdlog::warn("remote invalidation off: cannot duplicate the FUSE device: {}", strerror(errno));
    return nullptr;
  }
  Status st = WatchMetaChanges(engine, [n](const std::vector<MetaChange>& changes, bool all) {
    if (!all) n->Push(changes);  // missed changes: the kernel's timeouts cover them
  });
  if (!st.ok()) {
    if (st.code() == ENOTSUP) {
      spdlog::debug("remote invalidation off: {}", st.message());
    } else {
      spdlog::warn("cannot watch the metadata ({}): the kernel's caches expire by their timeouts alone", st.message());
    }
    return nullptr;
  }
  spdlog::info("the kernel's caches are dropped as other clients change the namespace ({} pushes changes)",
               engine->Describe());
  std::thread([n] { n->Loop(); }).detach();  // owns n with the watch's callback
  return std::unique_ptr<RemoteInvalidation>(new RemoteInvalidation(engine, std::move(n)));
}

RemoteInvalidation::~RemoteInvalidation() {
  StopWatchingMetaChanges(engine_);
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> l(n_->mu);
    n_->stopping = true;
    dropped = n_->dropped;
  }
  n_->cv.notify_all();
  if (dropped) spdlog::info("remote invalidation: {} changes dropped (queue full)", dropped);
}

}  // namespace tierfs
