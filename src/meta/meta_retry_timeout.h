// `--meta-retry-timeout`: one bound, for the whole process, on how long the engines on a
// server (Redis, PostgreSQL, etcd) keep retrying a metadata transaction through conflicts,
// restarts and failovers before it fails with EIO. Set, it overrides the META-URL's
// ?timeout= for every engine OpenKvEngine opens afterwards; unset (0), each URL's ?timeout=
// or the engine's default (30 s) applies. SQLite and mem engines have no server to wait
// for and ignore it.
//
// Why a process-wide setting and not an engine argument: every command opens its engines
// through OpenKvEngine(url) from many places (volume, mirror, primary, migration); one
// bound set once by the command line reaches all of them.
#pragma once

#include <chrono>

namespace tierfs {

void SetMetaRetryTimeout(std::chrono::milliseconds bound);
std::chrono::milliseconds MetaRetryTimeout();

// A shorter bound for the transactions the calling thread starts while the scope lives, on
// the engines above: for work a writer waits for but that may be skipped and done later.
// The writer's own compaction of a chunk that reached 1000 records (vfs/compactor.h) ran
// under the whole bound: in a 3-minute etcd soak its swap kept failing through leader
// kills (conflicts, then no member answering in time) and held an fsync 15.8 s, past the
// 15 s ?timeout=. Scopes nest; the shortest wins.
class TxnBudgetScope {
 public:
  explicit TxnBudgetScope(std::chrono::milliseconds budget);
  ~TxnBudgetScope();
  TxnBudgetScope(const TxnBudgetScope&) = delete;
  TxnBudgetScope& operator=(const TxnBudgetScope&) = delete;
  // d, or the budget of the calling thread's innermost scope when that is shorter.
  static std::chrono::milliseconds Cap(std::chrono::milliseconds d);

 private:
  std::chrono::milliseconds saved_;
};

}  // namespace tierfs
