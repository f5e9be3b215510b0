// The etcd engine's change notification (KvEngine::Watch): one thread keeps a watch of the
// volume's keys open on one member and hands each commit's value keys ("k" K,
// etcd_engine.h) to the callback as K.
//
// Streams and their faults:
//   - a member that dies, or loses its leader (the stream is opened with etcd's
//     require-leader flag, so a member cut off in a minority cancels it rather than go
//     silent), ends the stream: the next member is asked to resume from the revision after
//     the last one delivered, so nothing is missed or repeated; members are tried in turn
//     with backoff (20 ms growing to 1 s) while none serves;
//   - a resume point compacted away (the stream was down for longer than the history
//     kept): the callback is told that changes were missed (all), and the stream resumes
//     from the oldest revision still kept;
//   - a member that hangs without closing the connection is noticed by gRPC's keepalive
//     (etcd_grpc.cc) within about 15 s.
// Commits of this engine are skipped (meta/own_commits.h), by the commit marker each commit
// writes (etcd_engine.h: "x" id): a client does not invalidate what it just wrote itself.
// A commit whose answer was lost (resolved through its marker) is reported like another
// client's: a spurious invalidation, never a missed one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "meta/etcd_client.h"
#include "meta/kv_engine.h"
#include "meta/own_commits.h"

namespace tierfs::etcd {

class Watcher {
 public:
  // The volume's keys are watched (prefix); of those, value_prefix + K reach on_change as
  // K, and marker_prefix + id tell a commit's origin. Every commit after revision `from`
  // is reported.
  Watcher(Client& client, size_t members, std::string prefix, std::string value_prefix, std::string marker_prefix,
          int64_t from, OwnCommits* own, KvEngine::WatchFn on_change);
  // Stops the stream and returns after the callback's last call.
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

 private:
  void Loop();
  // Hands one message's changes to the callback, a commit at a time.
  void Deliver(WatchBatch&& b);

  Client& c_;
  const size_t members_;
  const std::string prefix_, value_prefix_, marker_prefix_;
  OwnCommits* own_;
  KvEngine::WatchFn fn_;
  int64_t last_ = 0;  // the last revision delivered (watch thread only); 0: none yet
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;               // guarded by mu_
  WatchStream* current_ = nullptr;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tierfs::etcd
