// etcd metadata engine: etcd://[USER:PASSWORD@]HOST1:2379,HOST2:2379,HOST3:2379/PREFIX
// (etcd_options.h has the options). A volume on a Raft-replicated cluster: a commit the
// engine reports is on a majority of the members, and the loss of a minority (the
// leader included) loses nothing and stops writes only for an election (about a second).
//
// Keys in etcd, all under "PREFIX/" (the volume's; other keys of the cluster untouched):
//   "k" K      the value of TierFS key K (etcd orders keys bytewise, as TierFS needs)
//   "W"        empty: written by every commit (its mod revision is the last commit's)
//   "x" id     commit marker (below), on a lease: gone 10 minutes or more after it was set
//   "tierfs"   marks the prefix as a TierFS volume, with the layout's version
//
// Transactions are optimistic: an attempt reads at one revision (a snapshot, etcd_txn.h),
// buffers its writes, and commits them in one etcd Txn that compares the mod revisions of
// what it read: every metadata operation is one etcd transaction, never split, whatever
// the number of keys it touches. A failed compare (another client changed what the attempt
// read) reruns the callback after a jittered backoff; so does a snapshot compacted away.
// A read-only transaction is consistent by itself (one snapshot) and never validated.
//
// Failures: a member that refuses, stalls or has no leader is passed over for the next
// (etcd_client.h); when none serves, the attempt is retried until the deadline (?timeout=,
// 30 s by default), then the transaction fails with EIO saying what each member answered.
// Limits of the cluster are errors that say which flag to raise (EFBIG): --max-txn-ops
// (128 by default: a transaction writing more keys is refused; the test clusters and the
// README's run 10000) and --max-request-bytes (1.5 MiB).
//
// Ambiguous commits: a commit whose request reached a member but got no answer may still
// apply. Each commit therefore also writes its marker "x" id, on the condition that the
// marker is absent. The engine resolves a lost answer with a Txn that, if the marker is
// absent, writes it as "lost" (the old request's condition can then never hold: it will
// not apply later), else reads it: "1" is the commit's own (report success), "lost" its
// resolver's (rerun the callback). Only if no member answers until the deadline is the
// outcome reported as unknown (EIO). Markers sit on a lease granted for at least twice the
// deadline plus two minutes and renewed by a new grant after half of it, so they expire
// without a cleanup pass.
//
// Open checks the prefix: one holding keys but no "tierfs" key is refused (EINVAL) and
// left untouched, as is one of another layout. Reset() deletes the prefix's keys and marks
// it again. Passwords never appear in messages or Describe().
//
// History: etcd keeps every revision until the cluster compacts it. Run the members with
// --auto-compaction-retention (the README's and the tests' do: 1 hour, periodic); a
// snapshot compacted under an attempt makes it start again at a newer revision.
#pragma once

#include <memory>

#include "common/status.h"
#include "common/url.h"
#include "meta/kv_engine.h"

namespace tierfs {

// Connects to the cluster and checks (or marks) the prefix. An unreachable cluster (every
// member refuses) is reported at once; one without a leader is waited for until the deadline.
Result<std::unique_ptr<KvEngine>> OpenEtcdEngine(const Url& url);

}  // namespace tierfs
