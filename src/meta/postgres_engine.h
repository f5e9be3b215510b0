// PostgreSQL metadata engine ("postgres://USER:PASSWORD@HOST:PORT/DB", also postgresql://;
// URL details in postgres_params.h).
//
// Layout: the whole key space is one table, tierfs_kv(k bytea PRIMARY KEY, v bytea NOT
// NULL), and the commit markers (below) another, tierfs_commits(id text PRIMARY KEY, seq
// int8 NOT NULL), both created on first open (or created beforehand by an administrator;
// the engine then needs only SELECT, INSERT, UPDATE, DELETE and TRUNCATE on tierfs_kv and
// the same but TRUNCATE on tierfs_commits). bytea compares with memcmp
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
// used). Reads announced with KvTxn::Prefetch travel in one round trip (open: attributes and
// chunk 0's map, three statements). The planner is told to use the key index even on tiny tables (enable_seqscan=off),
// because a sequential scan under SERIALIZABLE locks the whole table and makes every
// concurrent writer conflict.
//
// Connections are pooled (16 kept idle; opening one costs tens of milliseconds with SCRAM
// authentication). Session state (prepared statements, settings) is per connection, so a
// pooler in front of the server must run in session mode. A connection that breaks (server
// restart, network) is dropped with the idle ones, and the transaction is run again on a
// new connection, with backoff, until the timeout; this is safe as long as COMMIT was not
// sent, which is checked just before sending it. If the connection breaks during COMMIT the
// outcome is looked up through a commit marker: every pooled connection has a row of its
// own in tierfs_commits (planted when it opens, deleted when it closes), and each write
// transaction sets that row's seq to the next number in a batch of its own just before
// COMMIT (the server flushes that reply before it runs COMMIT; the row lock it takes is
// held until the transaction ends). On a new connection, SELECT ... FOR UPDATE NOWAIT of
// the row tells: our number -> committed; an older one -> not applied, run it again; row
// locked -> still running, ask again until the timeout. The row is deleted in the same
// transaction. When the server itself said it was ending the session (shutdown, restart)
// or that it is read-only before the marker's reply, COMMIT never ran, and the transaction
// is run again. A connection that dies silently between sending COMMIT and receiving the
// marker's reply leaves the row's state unknown until the backend that had the transaction
// is gone: the resolver asks pg_stat_activity for that backend's pid when it reaches the
// same HOST:PORT, and reads the row once it is gone (or at once on another server: after
// a failover the new primary holds the commit if and only if its WAL reached it, and the
// old backend can commit nothing there any more); the broken connection is shut down
// first, so that a backend still waiting for it (the client gave up at its io-timeout)
// ends at its next read instead of staying until the timeout. Only a backend that outlives the
// timeout (a server that never notices the broken connection, or a commit waiting for a
// standby that never answers) leaves the outcome unknown: Txn then fails with EIO saying
// that the transaction may or may not have been applied. The marker update costs no
// round trip.
// (The transaction id, pg_current_xact_id, cannot serve: after a crash or a failover an id
// whose WAL never reached the surviving server is handed to another transaction there,
// and pg_xact_status would answer for that one.) Markers of connections that broke are
// deleted through the next connection opened, which waits for the deletion and keeps the
// ids that failed (that connection broke too, or a row is still locked by a transaction
// the server has not ended) for the next one; closing the engine deletes the rest and
// those of its idle connections. A client that crashes leaves its rows (a few dozen bytes
// each).
//
// High availability (several hosts in the URL, postgres_params.h): a new connection goes to
// whichever listed server takes writes now (target_session_attrs=read-write), so after a
// failover the broken connections are replaced by ones to the new primary; while no server
// takes writes (the seconds an election takes), connecting fails with EAGAIN and is retried
// with backoff until the timeout. A statement refused because the server became read-only
// (SQLSTATE 25006: a demoted primary) drops the connection and runs the transaction again.
// A lost COMMIT is resolved on the new primary: with synchronous replication (Patroni's
// synchronous_mode, synchronous_commit on) a commit acknowledged by the old primary is on
// the synchronous standby that Patroni promotes, and its marker with it.
//
// Durability is the server's: with synchronous_commit=on (the default) an acknowledged
// transaction survives a server crash; Durability() reports whether a synchronous standby
// also has it.
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
