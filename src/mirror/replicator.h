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
// Data: by default the mirror shares the primary's object store (its format record names
// the same store): blocks are immutable, so a block named by an applied record is
// readable. With a store of its own (--storage/--bucket, given when the mirror is seeded),
// every object the records of a batch (or the keys of a seeding batch) reference is copied
// into it first (block_copier.h), and the mirror's format record names both stores: its
// clients read from the mirror's, and through to the primary's for a block it lacks.
//
// Consumer: the replicator registers the mirror as a reader of the primary's change log
// (meta/change_consumers.h, name "mirror:" + the mirror's engine) and, after every batch,
// says which commit the mirror holds; the primary keeps for it the log it has not read
// and the blocks of data released by commits it has not applied, so a lagging mirror
// never finds the data of its state deleted (shared store) or missing for the copy (own).
//
// Errors: the primary unreachable or a transaction failing: retried with backoff, the
// mirror keeps its last state (clients keep reading it; `tierfs status` shows its age).
// The primary's log trimmed past `applied`: the replicator stops with ESTALE and says to
// run it again with --reseed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "meta/mirror_state.h"
#include "object/object_store.h"

namespace tierfs::mirror {

class BlockCopier;
struct ObjectRef;

struct ReplicatorOptions {
  std::string primary_url, mirror_url;
  size_t batch = 1000;      // change records per mirror transaction, at most
  double interval = 0.2;    // seconds between looks at the primary once caught up
  double lease_ttl = 10;    // seconds a lease lasts unless renewed
  bool once = false;        // return once caught up (and the mirror is ready)
  bool reseed = false;      // copy the primary again, whatever the mirror holds
  // The mirror's own object store (storage, bucket, credentials); storage "": shared with
  // the primary. Taken when the mirror is seeded; a running mirror keeps the store it has.
  FormatRecord store;
  int threads = 16;         // objects copied at a time
};

// What Run did, for the command's summary and tests.
struct ReplicatorStats {
  uint64_t seeded_keys = 0;
  uint64_t records = 0;     // change records applied
  uint64_t batches = 0;     // mirror transactions that applied them
  uint64_t applied = 0;     // the mirror's `applied` at the end
  uint64_t objects = 0, bytes = 0;  // copied into the mirror's store
  uint64_t missing = 0;     // objects the primary no longer had (block_copier.h)
};

class Replicator {
 public:
  static Result<std::unique_ptr<Replicator>> Open(const ReplicatorOptions& options);
  ~Replicator();

  // Seeds when needed, then applies until `stop` (or, with once, until caught up).
  Status Run(const std::atomic<bool>& stop);
  const ReplicatorStats& stats() const { return stats_; }
  // Where the mirror stands, for metrics: safe to call from any thread.
  struct Progress {
    uint64_t applied = 0, primary_last = 0, records = 0, objects = 0, bytes = 0, missing = 0;
    int64_t applied_ns = 0, checked_ns = 0, block_lag_bytes = 0;
  };
  Progress progress() const;

 private:
  Replicator(const ReplicatorOptions& o, std::unique_ptr<KvEngine> primary, std::unique_ptr<KvEngine> mirror);
  // Waits for the lease, seeds when needed, applies; EAGAIN when the lease was lost.
  Status Follow(const std::atomic<bool>& stop);
  Status Seed();
  // True when this replicator holds (or just took) the lease.
  Result<bool> Lease();
  // Applies one batch; the number of records applied (0: nothing new).
  Result<size_t> ApplyBatch();
  // Opens the stores of a mirror with a store of its own (after seeding wrote its format).
  Status OpenStores();
  // Adds the objects a write references to refs (none when the store is shared).
  void CollectObjects(std::string_view key, const std::string* value, std::vector<ObjectRef>* refs) const;
  // Copies them into the mirror's store, all of a batch in one parallel copy.
  Status CopyObjects(std::vector<ObjectRef> refs);
  // Writes the bytes a copy is about to move into MS (status shows them while it runs).
  void NoteBlockLag(int64_t bytes);
  // Writes the primary's last commit into MS when a batch cannot be applied (status then
  // shows the commits the mirror is held behind, and their age).
  void NoteBehind(uint64_t primary_last);
  // Edits MS in one transaction of the mirror's engine, if the lease is still ours; a
  // failure is logged (these notes are for status, the mirror's state does not depend on them).
  void EditState(const std::function<void(MirrorState&)>& edit);
  // Tells the primary how far the mirror is (its registered consumer record).
  Status Report(uint64_t applied, int64_t applied_ns);

  ReplicatorOptions o_;
  std::unique_ptr<KvEngine> primary_, mirror_;
  std::string holder_;
  int64_t lease_until_ns_ = 0;
  int64_t last_checked_write_ns_ = 0;
  bool reseed_done_ = false;  // --reseed copies once, not again after a lost lease
  ReplicatorStats stats_;
  std::unique_ptr<ObjectStore> primary_store_, mirror_store_;  // own store only
  std::unique_ptr<BlockCopier> copier_;
  std::atomic<int64_t> block_left_{0};
  int64_t reported_ns_ = 0;  // when Report last wrote
  std::map<std::string, std::string> counters_;  // the primary's usage counters, read at counters_ns_
  int64_t counters_ns_ = 0;
  mutable std::mutex progress_mu_;
  Progress progress_;  // guarded by progress_mu_ (block_lag_bytes: block_left_)
};

}  // namespace tierfs::mirror
