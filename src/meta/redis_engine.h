// Redis metadata engine: redis://[USER:PASSWORD@]HOST[:PORT][/DB][?timeout=30s]
//
// Maps the ordered, transactional KvEngine onto one Redis database (standalone server;
// the engine owns the whole database).
//
// Redis keys (K = a TierFS key, g = keys::ScanGroup(K), a prefix of K):
//   "k" K      string  the value of K
//   "i" g      zset    every K of group g, score 0, so ZRANGEBYLEX orders them bytewise
//   "v" g      integer version of group g: increased by every commit that changes a key of
//                      g, deleted with the group's last key
//   "G"        zset    the groups that have keys, for scans that cross groups
//   "W"        integer global version: increased by every commit
//   "x" id     string  commit marker (below), expires
//   "tierfs"   string  marks the database as a TierFS volume (set when it was empty)
// and the pub/sub channel "tierfs:changes:" DB, on which every commit is published
// (redis_watch.h: how Watch tells mounts of other clients' changes).
// An indexed key whose "k" value is missing or not a string (damage done behind the
// engine's back) is scanned with an empty value, so that the layers above report it as a
// damaged record (redis_scripts.h); deleting it drops its index entry.
// Every scan the semantics layer does stays inside one group (key_schema.h), so the index
// of a directory, of a file's chunk records or of a session's locks is a zset of its own.
// Whole-table walks (fsck, gc, dump) merge the groups of their range in order.
//
// Transactions are optimistic (WATCH/MULTI/EXEC) on a pooled connection held for the
// attempt; the callback runs on the client:
// - Get: WATCH "k" K + GET, one round trip; values read are cached for the attempt.
// - Scan inside one group: WATCH "v" g + a read-only script that returns index range and
//   values atomically, one round trip per batch. Other scans watch "W" instead.
// - Prefetch (keys and whole prefixes a transaction is about to read): WATCHes of them and
//   one script that reads the keys and each prefix's first batch atomically, one round
//   trip; an open (attributes and chunk 0's map) is then a single consistent read.
// - Put/Delete are buffered in the client and merged into Get and Scan results.
// - Commit: MULTI + EVALSHA of the commit script (values, indexes, "G", versions, marker) +
//   EXEC, one round trip; the script also publishes the commit's keys. A nil EXEC
//   (something watched changed) reruns the callback after exponential backoff with jitter.
// - A transaction that wrote nothing and read in one round trip is consistent by itself
//   (getattr costs one round trip). One that read in several round trips, or whose
//   callback failed after several reads (its error may come from an inconsistent view),
//   is validated by an empty MULTI/EXEC under its watches and rerun on conflict.
// - Blind writes (no reads) commit without watches and never conflict.
//
// Failures: a broken connection or a busy server (restart, LOADING) drops the connection
// and reruns the attempt on a new one. Conflicts and unavailability are retried until the
// deadline (?timeout=, 30 s by default), then the transaction fails with EIO.
//
// A commit whose EXEC reply was lost (connection broken after sending it) is ambiguous:
// it may or may not have applied. Each commit therefore carries a random marker that the
// commit script sets (SET NX, expiring after deadline + 60 s) before writing. The engine
// resolves a lost reply on a new connection with a script that either finds the marker
// (committed: report success) or plants it as "lost" so the old EXEC can never apply
// later (not committed: rerun the callback). Only if the server stays unreachable until
// the deadline is the outcome reported as unknown (EIO). Markers of successful commits are
// unlinked on the connection's next round trip.
//
// Durability is the server's: with appendonly yes and appendfsync always an acknowledged
// commit survives a server crash; with everysec the last second may be lost.
//
// Open checks the database: one holding keys but no "tierfs" marker is refused (EINVAL)
// and left untouched. Reset() empties only a TierFS database (FLUSHDB). Errors name the
// server: unreachable -> the reason, wrong password -> EACCES, no such database -> EINVAL.
// Passwords never appear in messages or Describe().
#pragma once

#include <memory>

#include "common/url.h"
#include "meta/kv_engine.h"

namespace tierfs {

// The returned engine is thread-safe: any thread may run transactions concurrently, each
// on its own connection. A transaction may not start another on the same engine (EDEADLK).
Result<std::unique_ptr<KvEngine>> OpenRedisEngine(const Url& url);

}  // namespace tierfs
