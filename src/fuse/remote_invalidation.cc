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

// tierfs_remote_invalidations_total{kind}: "all" (every name at once), "attr", "entry", and
// "attr_open_here" (counted, not sent: see the header).
metrics::Counter& Invalidations(const char* kind) {
  return metrics::Default().GetCounter("tierfs_remote_invalidations_total",
                                       "Kernel cache entries dropped for other clients' changes", {{"kind", kind}});
}
}  // namespace

struct RemoteInvalidation::Notifier {
  int fd = -1;
  uint64_t root = 1;
  std::function<bool(uint64_t)> open_here;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<MetaChange> queue;  // guarded by mu
  bool stopping = false;         // guarded by mu
  bool all = false;              // guarded by mu: drop every cached name first
  bool epoch_refused = false;    // notifier thread only
  uint64_t dropped = 0;          // guarded by mu

  ~Notifier() {
    if (fd >= 0) close(fd);
  }

  void Push(const std::vector<MetaChange>& changes) {
    std::lock_guard<std::mutex> l(mu);
    // Queued even when every name is about to be dropped: an attribute change still
    // matters to the open files the kernel reaches without a name (fstat).
    if (queue.size() + changes.size() > kMaxQueued) {
      ++dropped;
      queue.clear();
      all = true;
    } else {
      queue.insert(queue.end(), changes.begin(), changes.end());
    }
    cv.notify_one();
  }

  // Changes were missed (the engine's watch was cut): what is queued is part of it.
  void PushAll() {
    std::lock_guard<std::mutex> l(mu);
    queue.clear();
    all = true;
    cv.notify_one();
  }

  void SendAll() {
    int rc = NotifyIncEpoch(fd);
    if (rc == -EINVAL || rc == -ENOSYS) {
      if (!epoch_refused) {
        spdlog::info("remote invalidation: this kernel cannot drop every cached name at once (Linux 6.16+ can): "
                     "after a lost metadata watch, names expire by --entry-cache and --dir-entry-cache");
      }
      epoch_refused = true;
      return;
    }
    if (rc < 0) spdlog::debug("remote invalidation of every name: {}", strerror(-rc));
    static metrics::Counter& alls = Invalidations("all");
    alls.Add();
  }

  // The kernel's inode for a volume inode (the mount's root is FUSE_ROOT_ID).
  uint64_t KernelIno(uint64_t ino) const { return fuse_internal::InoOut(root, ino); }

  void Send(const MetaChange& c) {
    if (c.kind == MetaChange::kAttr && open_here && open_here(c.ino)) {
      static metrics::Counter& kept = Invalidations("attr_open_here");
      kept.Add();  // counted, not sent (see the header)
      return;
    }
    int rc = c.kind == MetaChange::kAttr ? NotifyInvalAttrs(fd, KernelIno(c.ino))
                                         : NotifyInvalEntry(fd, KernelIno(c.parent), c.name);
    // ENOENT: the kernel does not hold that inode or name, the common case.
    if (rc < 0 && rc != -ENOENT) spdlog::debug("remote invalidation: {}", strerror(-rc));
    static metrics::Counter& attrs = Invalidations("attr");
    static metrics::Counter& entries = Invalidations("entry");
    (c.kind == MetaChange::kAttr ? attrs : entries).Add();
  }

  void Loop() {
    pthread_setname_np(pthread_self(), "fuse-remote-inv");
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return stopping || all || !queue.empty(); });
      if (stopping) return;
      if (all) {
        all = false;
        l.unlock();
        SendAll();
        l.lock();
        continue;
      }
      MetaChange c = std::move(queue.front());
      queue.pop_front();
      l.unlock();
      Send(c);
      l.lock();
    }
  }
};

std::unique_ptr<RemoteInvalidation> RemoteInvalidation::Start(KvEngine* engine, fuse_session* se, uint64_t root,
                                                             std::function<bool(uint64_t)> open_here) {
  auto n = std::make_shared<Notifier>();
  n->root = root;
  n->open_here = std::move(open_here);
  n->fd = fcntl(fuse_session_fd(se), F_DUPFD_CLOEXEC, 0);
  if (n->fd < 0) {
    spdlog::warn("remote invalidation off: cannot duplicate the FUSE device: {}", strerror(errno));
    return nullptr;
  }
  Status st = WatchMetaChanges(engine, [n](const std::vector<MetaChange>& changes, bool all) {
    if (all) {
      n->PushAll();
    } else {
      n->Push(changes);
    }
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
  if (dropped) spdlog::info("remote invalidation: the queue overflowed {} time(s); every cached name was dropped", dropped);
}

}  // namespace tierfs
