#include "meta/etcd_watch.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <utility>
#include <vector>

#include "common/backoff.h"

namespace tierfs::etcd {

Watcher::Watcher(Client& client, size_t members, std::string prefix, std::string value_prefix,
                 std::string marker_prefix, int64_t from, OwnCommits* own, KvEngine::WatchFn on_change)
    : c_(client),
      members_(members),
      prefix_(std::move(prefix)),
      value_prefix_(std::move(value_prefix)),
      marker_prefix_(std::move(marker_prefix)),
      own_(own),
      fn_(std::move(on_change)),
      last_(from) {
  thread_ = std::thread([this] { Loop(); });
}

Watcher::~Watcher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    if (current_) current_->Cancel();
  }
  cv_.notify_all();
  thread_.join();
}

void Watcher::Deliver(WatchBatch&& b) {
  if (b.compact_revision != 0) {
    spdlog::warn("etcd {}: the metadata watch resumes at revision {} after a compaction: changes before it were "
                 "missed, so the kernel's caches expire by their timeouts",
                 c_.describe(), b.compact_revision);
    fn_({}, true);
    last_ = b.compact_revision - 1;
    return;
  }
  if (b.created) return;
  std::vector<std::string> keys;
  bool own = false;
  int64_t rev = 0;
  auto flush = [&] {
    if (!keys.empty() && !own) fn_(keys, false);
    keys.clear();
    own = false;
  };
  auto starts = [](const std::string& key, const std::string& prefix) {
    return key.size() >= prefix.size() && key.compare(0, prefix.size(), prefix) == 0;
  };
  for (auto& [key, mod] : b.changes) {
    if (mod != rev) {
      flush();
      rev = mod;
    }
    if (starts(key, value_prefix_)) {
      keys.push_back(key.substr(value_prefix_.size()));
    } else if (starts(key, marker_prefix_) && own_->Contains(key)) {
      own = true;
    }
    if (mod > last_) last_ = mod;
  }
  flush();
}

void Watcher::Loop() {
  pthread_setname_np(pthread_self(), "etcd-watch");
  size_t member = 0;
  int failures = 0;
  bool refused = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
    }
    auto w = c_.Watch(prefix_, PrefixEnd(prefix_), last_, member);
    Status st = w.ok() ? Status::OK() : w.status();
    if (w.ok()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stop_) return;
        current_ = w->get();
      }
      st = (*w)->Run([&](WatchBatch&& b) {
        if (b.created) failures = 0;
        Deliver(std::move(b));
      });
      std::lock_guard<std::mutex> l(mu_);
      current_ = nullptr;
      if (stop_) return;
    }
    if (st.code() == ESTALE) continue;  // resumes at once from the compaction point
    if (st.code() == EACCES && !refused) {
      refused = true;
      spdlog::error("etcd {}: cannot watch the metadata ({}); the kernel's caches expire by their timeouts",
                    c_.describe(), st.message());
    } else {
      spdlog::debug("etcd {}: the metadata watch ended: {}", c_.describe(), st.message());
    }
    member = (member + 1) % members_;
    auto pause = JitteredBackoff(failures++, std::chrono::milliseconds(20), std::chrono::seconds(1));
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, pause, [&] { return stop_; });
  }
}

}  // namespace tierfs::etcd
