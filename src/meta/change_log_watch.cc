#include "meta/change_log_watch.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <string>
#include <thread>

#include "meta/change_log.h"

namespace tierfs {

void OwnCommits::Attempt(uint64_t seq) {
  std::lock_guard<std::mutex> l(mu_);
  pending_.insert(seq);
}

void OwnCommits::Finish(const std::vector<uint64_t>& attempts, uint64_t committed) {
  std::lock_guard<std::mutex> l(mu_);
  for (uint64_t s : attempts) {
    if (auto it = pending_.find(s); it != pending_.end()) pending_.erase(it);
  }
  if (committed != 0) committed_.insert(committed);
}

bool OwnCommits::Pending(uint64_t seq) {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.count(seq) != 0;
}

bool OwnCommits::TakeCommitted(uint64_t seq) {
  std::lock_guard<std::mutex> l(mu_);
  // Older ones can no longer come: the reader is past them.
  committed_.erase(committed_.begin(), committed_.lower_bound(seq));
  return committed_.erase(seq) != 0;
}

struct ChangeLogPoller::State {
  KvEngine* engine;
  KvEngine::WatchFn on_change;
  OwnCommits* own;
  std::chrono::milliseconds interval;
  uint64_t next = 1;  // the first record not reported yet
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // guarded by mu
  std::thread thread;

  // One look at the log: reports what is new. Returns false when reading failed.
  bool Poll() {
    auto last = LastChangeSeq(engine);
    if (!last.ok()) {
      spdlog::debug("change log watch: reading the counter failed: {}", last.status().ToString());
      return false;
    }
    if (*last < next) return true;
    bool gap = false;
    Status st = ReadChanges(
        engine, next, 1000,
        [&](const ChangeRecord& r) {
          if (r.seq != next) {  // trimmed before it was read
            gap = true;
            return false;
          }
          if (own->Pending(r.seq)) return false;  // settled by the next poll
          if (!own->TakeCommitted(r.seq)) {
            std::vector<std::string> keys;
            keys.reserve(r.writes.size());
            for (const auto& w : r.writes) keys.push_back(w.first);
            on_change(keys, false);
          }
          next = r.seq + 1;
          return true;
        });
    if (gap || !st.ok()) {
      if (!st.ok()) spdlog::warn("change log watch: {}; treating everything as changed", st.ToString());
      on_change({}, true);
      next = *last + 1;
    }
    return true;
  }

  void Run() {
    bool failing = false;
    std::unique_lock<std::mutex> l(mu);
    while (!cv.wait_for(l, interval, [&] { return stop; })) {
      l.unlock();
      bool ok = Poll();
      if (!ok && !failing) spdlog::warn("change log watch: the engine cannot be read; retrying");
      if (ok && failing) {
        // Changes may have come and gone unseen only if trimmed; Poll finds that. Other
        // clients' changes while unreadable are in the log and reported now.
        spdlog::info("change log watch: reading again");
      }
      failing = !ok;
      l.lock();
    }
  }
};

Result<std::unique_ptr<ChangeLogPoller>> ChangeLogPoller::Start(KvEngine* engine, KvEngine::WatchFn on_change,
                                                                OwnCommits* own, std::chrono::milliseconds interval) {
  auto s = std::make_unique<State>();
  s->engine = engine;
  s->on_change = std::move(on_change);
  s->own = own;
  s->interval = interval;
  ASSIGN_OR_RETURN(const uint64_t last, LastChangeSeq(engine));
  s->next = last + 1;
  State* raw = s.get();
  s->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<ChangeLogPoller>(new ChangeLogPoller(std::move(s)));
}

ChangeLogPoller::ChangeLogPoller(std::unique_ptr<State> s) : s_(std::move(s)) {}

ChangeLogPoller::~ChangeLogPoller() {
  {
    std::lock_guard<std::mutex> l(s_->mu);
    s_->stop = true;
  }
  s_->cv.notify_all();
  s_->thread.join();
}

}  // namespace tierfs
