// SQLite metadata engine ("sqlite3://PATH"): the embedded default.
//
// The key space is the table kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID, except
// the change log's records, kept in a rowid table of their own (sqlite_txn.h says why and
// how the two read as one key space); SQLite compares BLOBs with memcmp and then by length,
// which is the unsigned byte-string order of the KvEngine contract. The file is marked with a TierFS application_id so that
// pointing a META-URL at some other SQLite database fails instead of writing into it.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A committed
// transaction survives a crash of any process; after a power loss or OS crash the most
// recent transactions may be rolled back, but the database is always consistent.
//
// Privacy: the file holds every name of the volume and the object store's keys. Open
// creates it 0600 (SQLite gives the -wal and -shm files the database file's mode) and warns
// when an existing one is readable by its group or others.
//
// Sharing: several processes on one host may open the same file (WAL needs shared memory,
// so the file must be on a local file system, not NFS). Cross-process write conflicts
// surface as SQLITE_BUSY and are retried with bounded exponential backoff and jitter;
// after kMaxBusyWait the transaction fails with EIO.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "meta/kv_engine.h"

namespace tierfs {

// Thread-safe: any thread may call Txn/Reset concurrently. Each running transaction uses
// its own pooled connection; write transactions of this object are serialized by a mutex
// (so in-process writers queue instead of spinning on SQLITE_BUSY) while read-only
// transactions run in parallel on WAL snapshots. The callback must not start another
// transaction on the same engine (a nested Txn returns EDEADLK). The engine must outlive
// all transactions running on it.
class SqliteEngine final : public KvEngine {
 public:
  // Opens the database at path, which may be relative (resolved against the current
  // directory now, so later chdir() calls do not matter), creating it if missing when
  // `create` (else a missing file is ENOENT naming the path, and no connection of the
  // engine ever creates one). Fails with ENOENT when the parent directory is missing and
  // EINVAL when the file exists but is not a TierFS metadata database; such a file is
  // never modified.
  static Result<std::unique_ptr<SqliteEngine>> Open(const std::string& path, bool create = true);
  ~SqliteEngine() override;
  SqliteEngine(const SqliteEngine&) = delete;
  SqliteEngine& operator=(const SqliteEngine&) = delete;

  std::string Describe() const override;
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only = false) override;
  Status Reset() override;
  // fdatasync of the write-ahead log and the database file (commits run with
  // synchronous=NORMAL, which syncs only at checkpoints).
  Status Sync() override;
  // One copy, on this machine's disk: not safe against that machine's loss.
  Result<DurabilityReport> Durability() override;

  struct Conn;
  class Lease;
  struct Attempt;

 private:
  SqliteEngine(std::string path, std::string abs_path, bool create);

  Status InitSchema();
  // One try at opening a connection with pragmas set and statements prepared.
  Attempt OpenConn(bool prepare, std::unique_ptr<Conn>* out);
  Attempt Acquire(std::unique_ptr<Conn>* out);
  // Opens main_ if it is not open; the caller holds write_mu_.
  Attempt OpenMain();
  void Release(std::unique_ptr<Conn> conn);
  Attempt RunOnce(Conn& conn, const std::function<Status(KvTxn&)>& fn, bool read_only);
  // Calls attempt until it does not ask for a retry, sleeping with backoff in between.
  template <typename F>
  Status WithRetry(const char* what, F&& attempt);

  const std::string path_;      // as given, for messages and Describe()
  const std::string abs_path_;  // what connections open
  const bool create_;           // connections may create the file

  std::mutex write_mu_;  // held from BEGIN IMMEDIATE to COMMIT/ROLLBACK, and while main_ is in use
  // The connection of every write, and of every read that finds it free: its page cache stays
  // valid from one transaction to the next, where a pooled connection finds the database
  // changed by another connection and re-reads its pages. Guarded by write_mu_; reads that
  // find it busy take a pooled connection instead, so reads never wait for a write.
  std::unique_ptr<Conn> main_;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by pool_mu_
};

}  // namespace tierfs
