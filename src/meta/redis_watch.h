// The Redis engine's change notification (KvEngine::Watch). Redis's own client tracking
// reports keys one by one, without a commit's bounds or its origin, and needs RESP3 for
// anything but a redirect; so instead the commit script (redis_scripts.h) publishes each
// applied commit, atomically with it, on the volume's channel: the commit marker, then
// every key written or deleted. One thread holds a subscribed connection and hands each
// message's keys to the callback, a commit at a time and in commit order (Redis runs
// scripts one after another and delivers messages in order).
//
// Pub/sub delivers only to connected subscribers, so a gap cannot be resumed as etcd's
// revision history allows; instead:
//   - Start subscribes before returning, so every commit after it is reported;
//   - a lost connection (server restart, failover: in Sentinel mode the master is asked
//     again) is reopened with backoff (20 ms growing to 1 s), and once subscribed again the
//     callback is told that changes may have been missed (all);
//   - a server that hangs without closing the connection is found by a PING every 5 s
//     answered within the connection's io timeout; no answer: the connection is dropped
//     and reopened as above;
//   - a subscription the server refuses (an ACL user denied the channel) fails Start
//     with EACCES naming the channel; the engine's commits are unaffected (pcall).
// Commits of this engine are skipped (meta/own_commits.h: by the marker). Clients of an
// older TierFS that does not publish are not seen: mount every client of a volume with
// the same release.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "meta/kv_engine.h"
#include "meta/own_commits.h"
#include "meta/redis_conn.h"

namespace tierfs::redis {

// The channel a volume's commits are published on: one per database, since channels are
// shared by all the databases of a server.
std::string ChangeChannel(int db);

// Parses a published commit: its marker and keys (false on a malformed message).
bool ParseChange(std::string_view message, std::string* marker, std::vector<std::string>* keys);

class Watcher {
 public:
  using OpenFn = std::function<Result<std::unique_ptr<Conn>>()>;
  // Subscribes with a connection from open (the engine's: same server, password and
  // database) before returning; the watch thread runs on from there.
  static Result<std::unique_ptr<Watcher>> Start(OpenFn open, std::string channel, std::string describe,
                                                OwnCommits* own, KvEngine::WatchFn on_change);
  // Stops the thread; returns after the callback's last call.
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

 private:
  Watcher(OpenFn open, std::string channel, std::string describe, OwnCommits* own, KvEngine::WatchFn fn)
      : open_(std::move(open)),
        channel_(std::move(channel)),
        describe_(std::move(describe)),
        own_(own),
        fn_(std::move(fn)) {}
  // A connection subscribed to the channel (the confirmation read).
  Result<std::unique_ptr<Conn>> Subscribe();
  void Loop(std::unique_ptr<Conn> conn);
  // Reads from conn until it fails or the watch stops.
  Status Serve(Conn& conn);

  OpenFn open_;
  const std::string channel_, describe_;
  OwnCommits* own_;
  KvEngine::WatchFn fn_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tierfs::redis
