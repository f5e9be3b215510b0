// The replicator of a mirror volume (`tierfs mirror PRIMARY-META-URL MIRROR-META-URL`): it
// makes the mirror's metadata engine follow the primary's, commit by commit, through the
// primary's change log (meta/change_log.h). The mirror's records and the promise they keep
// are in meta/mirror_state.h.
//
// Seeding (a mirror engine without a volume, one whose seeding was interrupted before its
// copy was complete, or --reseed): the replicator empties the mirror's engine, writes the
// primary's format record (with mirror_of set, the change log off) and a state saying
// "seeding", notes the primary's last commit L0, copies every logged key and the usage counters
// in batches while the primary keeps changing, notes the last commit L1, then applies the
// log from L0 + 1. A copied key holds its value of some commit between L0 and L1, and every
// later write to it is in the log after L0, so once the log is applied up to L1 each key
// holds its value at the commit applied: the state is the primary's, and seeding ends in
// the transaction that reaches L1.
//
// Applying: whole change records, in commit order, at most --batch of them (and
// kBatchBytes of writes) per transaction of the mirror's engine; the same transaction
// checks that the replicator still holds the lease and that the state's `applied` is
// the one the batch follows (so a batch is never applied twice, nor by two replicators),
// renews the lease and writes the new `applied`. A killed replicator restarts from the
// mirror's `applied`.
//
// Lease: "ML" in the mirror's engine names the replicator allowed to apply until a time
// (--lease-ttl, renewed every third of it). Others wait and take over once it expired:
// several replicators may run for availability, one applies.
//
// Data: the mirror shares the primary's object store (its format record names the same
// store): blocks are immutable, so a block named by an applied record is readable. The
// primary deletes the blocks of data it dropped (after its trash, or at once for
// overwritten data), so a mirror that lags behind such a deletion can fail to read a file
// the primary has since dropped; copying blocks to a store of the mirror's own, and
// holding deletions back until every mirror applied them, are not built yet.
//
// Errors: the primary unreachable or a transaction failing: retried with backoff, the
// mirror keeps its last state (clients keep reading it; `tierfs status` shows its age).
// The primary's log trimmed past `applied`: the replicator stops with ESTALE and says to
// run it again with --reseed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "meta/kv_engine.h"
#include "meta/mirror_state.h"

namespace tierfs::mirror {

struct ReplicatorOptions {
  std::string primary_url, mirror_url;
  size_t batch = 1000;      // change records per mirror transaction, at most
  double interval = 0.2;    // seconds between looks at the primary once caught up
  double lease_ttl = 10;    // seconds a lease lasts unless renewed
  bool once = false;        // return once caught up (and the mirror is ready)
  bool reseed = false;      // copy the primary again, whatever the mirror holds
};

// What Run did, for the command's summary and tests.
struct ReplicatorStats {
  uint64_t seeded_keys = 0;
  uint64_t records = 0;     // change records applied
  uint64_t batches = 0;     // mirror transactions that applied them
  uint64_t applied = 0;     // the mirror's `applied` at the end
};

class Replicator {
 public:
  static Result<std::unique_ptr<Replicator>> Open(const ReplicatorOptions& options);
  ~Replicator();

  // Seeds when needed, then applies until `stop` (or, with once, until caught up).
  Status Run(const std::atomic<bool>& stop);
  const ReplicatorStats& stats() const { return stats_; }

 private:
  Replicator(const ReplicatorOptions& o, std::unique_ptr<KvEngine> primary, std::unique_ptr<KvEngine> mirror);
  // Waits for the lease, seeds when needed, applies; EAGAIN when the lease was lost.
  Status Follow(const std::atomic<bool>& stop);
  Status Seed();
  // True when this replicator holds (or just took) the lease.
  Result<bool> Lease();
  // Applies one batch; the number of records applied (0: nothing new).
  Result<size_t> ApplyBatch();

  ReplicatorOptions o_;
  std::unique_ptr<KvEngine> primary_, mirror_;
  std::string holder_;
  int64_t lease_until_ns_ = 0;
  int64_t last_checked_write_ns_ = 0;
  bool reseed_done_ = false;  // --reseed copies once, not again after a lost lease
  ReplicatorStats stats_;
};

}  // namespace tierfs::mirror
