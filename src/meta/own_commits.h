// The commit markers of an engine's latest commits, by which its change notification
// (KvEngine::Watch: etcd_watch.h, redis_watch.h) recognises the engine's own commits and
// skips them: a client does not invalidate what it just wrote itself. A marker is recorded
// before its commit is sent, because the notification may arrive before the commit's
// answer does. The last 4096 are kept; an older own commit would be reported like
// another client's (a spurious invalidation, never a missed one).
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

namespace tierfs {

class OwnCommits {
 public:
  void Add(const std::string& marker);
  bool Contains(const std::string& marker);

 private:
  std::mutex mu_;
  std::deque<std::string> order_;
  std::unordered_set<std::string> set_;
};

}  // namespace tierfs
