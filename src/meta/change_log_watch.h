// KvEngine::Watch for engines that cannot push changes (SQLite, PostgreSQL), on volumes
// whose change log is on (meta/change_log.h): a thread reads the log's counter every
// kChangeLogPollInterval (one key, one read-only transaction: on SQLite a read of the
// shared file, which is how mounts on one host see each other's commits; on PostgreSQL
// one small SELECT per client and interval) and, when it moved, hands on the keys of the
// new records in commit order, as etcd's watch and Redis's published commits do. Changes
// therefore show in other mounts within about the interval, instead of after the kernel's
// attribute and entry timeouts.
//
// This client's own commits are not reported (the contract of KvEngine::Watch): the
// change-log engine notes the sequence each attempt of a transaction appends (OwnCommits),
// and the poller waits at a record whose sequence an attempt here still holds (it may be
// this client's commit, not yet returned, or another client's that this attempt will lose
// to and retry after), then skips it only when it is this client's committed one.
//
// A gap (records trimmed before they were read: a client suspended for longer than the
// log's retention) or a damaged record is reported as "everything may have changed"
// (all), and the poller goes on from the newest record.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "common/status.h"
#include "meta/kv_engine.h"

namespace tierfs {

inline constexpr std::chrono::milliseconds kChangeLogPollInterval{100};

// This client's appended sequences. Threads: any.
class OwnCommits {
 public:
  // An attempt appended seq (not known yet to commit).
  void Attempt(uint64_t seq);
  // The transaction ended: its attempts' sequences are settled; committed is the seq its
  // committed attempt appended (0: none, or the transaction failed).
  void Finish(const std::vector<uint64_t>& attempts, uint64_t committed);
  // Whether an attempt here holds seq still.
  bool Pending(uint64_t seq);
  // Whether seq is this client's committed record (forgotten once asked).
  bool TakeCommitted(uint64_t seq);

 private:
  std::mutex mu_;
  std::multiset<uint64_t> pending_;  // guarded by mu_
  std::set<uint64_t> committed_;     // guarded by mu_
};

class ChangeLogPoller {
 public:
  // Starts from the log's newest record (what came before is not reported). engine: the
  // unlogged engine the log is in.
  static Result<std::unique_ptr<ChangeLogPoller>> Start(KvEngine* engine, KvEngine::WatchFn on_change,
                                                        OwnCommits* own,
                                                        std::chrono::milliseconds interval = kChangeLogPollInterval);
  // Stops; returns after on_change's last call.
  ~ChangeLogPoller();

  struct State;

 private:
  explicit ChangeLogPoller(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace tierfs
