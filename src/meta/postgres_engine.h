// PostgreSQL metadata engine ("postgres://USER:PASSWORD@HOST:PORT/DB", also postgresql://;
// URL details in postgres_params.h).
//
// Layout: the whole key space is one table, tierfs_kv(k bytea PRIMARY KEY, v bytea NOT
// NULL), created on first open (or created beforehand by an administrator; the engine then
// needs only SELECT, INSERT, UPDATE, DELETE and TRUNCATE on it). bytea compares with memcmp
// and then by length, which is the unsigned byte-string order of the KvEngine contract, and
// keys and values travel as binary parameters, so nothing is escaped. The table is found
// through the search_path, so ?options=-csearch_path%3Dmyschema puts a volume in a schema.
//
// Isolation: write transactions run SERIALIZABLE. PostgreSQL's predicate locks then cover
// ranges that were scanned, so "scan a range, find it empty, insert into it" from two
// clients lets exactly one commit; the other fails with a serialization failure (SQLSTATE
// 40001, or 40P01 for a deadlock) and is run again after a backoff with jitter, until the
// timeout (30 s, ?timeout= in the URL) has passed, then EIO. Read-only transactions run
// REPEATABLE READ READ ONLY: one consistent snapshot, never a conflict. Note that
// PostgreSQL's predicate locks on the key index are per page, so writers of nearby keys may
// conflict without touching the same key; that costs a retry, never correctness.
//
// Round trips: each connection runs in libpq pipeline mode with its statements prepared
// and binary parameters. BEGIN travels with the first statement; Put and Delete are queued
// and sent with the next read or with COMMIT. A write transaction of r reads (Get or Scan
// batch of 256 rows) costs r + 1 round trips (writes are flushed early only when 512 pile
// up), plus one more to open a connection when the pool has none; a read-only one
// costs r (its COMMIT is sent without waiting; the reply is read when the connection is next
// used). The planner is told to use the key index even on tiny tables (enable_seqscan=off),
// because a sequential scan under SERIALIZABLE locks the whole table and makes every
// concurrent writer conflict.
//
// Connections are pooled (16 kept idle; opening one costs tens of milliseconds with SCRAM
// authentication). Session state (prepared statements, settings) is per connection, so a
// pooler in front of the server must run in session mode. A connection that breaks (server
// restart, network) is dropped with the idle ones, and the transaction is run again on a
// new connection, with backoff, until the timeout; this is safe as long as COMMIT was not
// sent, which is checked just before sending it. If the connection breaks during COMMIT the
// outcome is looked up: the transaction id is fetched in a batch of its own just before
// COMMIT (pg_current_xact_id; the server flushes that reply before it runs COMMIT) and asked
// about on a new connection (pg_xact_status): committed -> success, aborted -> run again.
// When the server itself said it was ending the session (shutdown, restart) before that
// reply, COMMIT never ran, and the transaction is run again. Only a connection that dies
// silently between sending COMMIT and receiving the transaction id leaves the outcome
// unknown: Txn then fails with EIO saying that the transaction may or may not have been
// applied.
//
// Durability is the server's: with synchronous_commit=on (the default) an acknowledged
// transaction survives a server crash.
//
// Reset() (format --force, tests) runs TRUNCATE, which waits up to the timeout for other
// clients' transactions on the table and fails with EBUSY after that.
#pragma once

#include <memory>

#include "common/url.h"
#include "meta/kv_engine.h"

namespace tierfs {

// Thread-safe: any thread may call Txn/Reset concurrently; each running transaction uses
// its own pooled connection. The callback must not start another transaction on the same
// engine (a nested Txn returns EDEADLK). Connects once before returning, so a wrong
// password (EACCES, "authentication failed"), a missing database (ENOENT, naming it) or an
// unreachable server (message with HOST:PORT and the reason) fail here. Describe() is the
// URL with the password replaced by "****".
Result<std::unique_ptr<KvEngine>> OpenPostgresEngine(const Url& url);

}  // namespace tierfs
