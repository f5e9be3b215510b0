#include "meta/postgres_engine.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/backoff.h"
#include "meta/postgres_conn.h"
#include "meta/postgres_params.h"
#include "meta/postgres_txn.h"
#include "meta/meta_retry_timeout.h"
#include "meta/txn_nesting.h"

namespace tierfs {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// Connections kept open while idle; beyond this, released connections are closed.
constexpr size_t kMaxIdleConnections = 16;
// Backoff between runs of a transaction that conflicted; short, because the other
// transaction usually commits within a round trip or two.
constexpr microseconds kConflictBackoffBase(500);
constexpr microseconds kConflictBackoffCap(50'000);
// Backoff between reconnection attempts: a restarting server needs a second or so.
constexpr microseconds kReconnectBackoffBase(20'000);
constexpr microseconds kReconnectBackoffCap(1'000'000);
// Commit markers of closed connections remembered for deletion (beyond this, forgotten:
// a leftover row costs a few dozen bytes and nothing else).
constexpr size_t kMaxOrphanMarkers = 4096;
// Deleted per new connection (one statement; the ids travel as one text parameter).
constexpr size_t kOrphansPerCleanup = 256;
// A marker whose planting was cut off is deleted only this long after: the server may still
// run the INSERT it had already received, and a deletion before it would find no row and
// miss the one that appears after (a cut test left 20 rows behind that way).
constexpr std::chrono::seconds kPlantSettle(1);
// Retrying this long is unusual enough to log (once per transaction).
constexpr std::chrono::seconds kWarnAfter(1);
constexpr std::chrono::seconds kLostWarnInterval(5);


// Connection failures worth waiting out (the server restarting, a network blip), as
// opposed to ones that will not go away by themselves (wrong password, missing database).
bool IsTransient(const Status& st) {
  switch (st.code()) {
    case EACCES:
    case ENOENT:
    case EINVAL:
    case ENOMEM:
      return false;
    default:
      return true;
  }
}

struct Attempt {
  Status status;  // on retry: why, for the final message
  bool retry = false;
  static Attempt Done(Status s) { return Attempt{std::move(s), false}; }
  static Attempt Retry(Status why) { return Attempt{std::move(why), true}; }
};

class PostgresEngine final : public KvEngine {
 public:
  explicit PostgresEngine(pg::Params params) : params_(std::move(params)) {}
  // Deletes the markers of every connection it had (see DeleteMarkers).
  ~PostgresEngine() override;

  Status Init();
  std::string Describe() const override { return params_.redacted; }
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override;
  Status Reset() override;
  Result<DurabilityReport> Durability() override;

 private:
  // Gives a connection back to the pool when an attempt ends; a connection whose state is
  // unknown (broken, or the callback threw) is closed instead.
  class Lease {
   public:
    Lease(PostgresEngine* engine, std::unique_ptr<pg::Conn> conn)
        : engine_(engine), conn_(std::move(conn)) {}
    ~Lease() {
      if (keep_) {
        engine_->Release(std::move(conn_));
      } else {
        engine_->Retire(std::move(conn_));
      }
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    pg::Conn& operator*() { return *conn_; }
    void Keep() { keep_ = true; }

   private:
    PostgresEngine* engine_;
    std::unique_ptr<pg::Conn> conn_;
    bool keep_ = false;
  };

  Status InitSchema(pg::Conn& conn, bool* retry);
  Status CreateTable(pg::Conn& conn, const std::string& name, const std::string& columns, const std::string& grants,
                     const std::string& what, bool* retry);
  Result<std::unique_ptr<pg::Conn>> Acquire();
  void Release(std::unique_ptr<pg::Conn> conn);
  // Closes the idle connections: after one broke they are most likely broken too.
  void DropIdle();
  // Closes conn, remembering its commit marker for deletion through a later connection
  // (a broken one cannot delete it itself).
  void Retire(std::unique_ptr<pg::Conn> conn);
  // Gives marker ids back to orphans_ (up to kMaxOrphanMarkers).
  void Requeue(std::vector<std::string> ids);
  Attempt RunOnce(pg::Conn& conn, const std::function<Status(KvTxn&)>& fn, bool read_only,
                  Clock::time_point deadline);
  // Finds out whether the transaction that set marker seq of connection marker_id committed
  // after the connection broke during its COMMIT. `unconfirmed` is that broken connection
  // when the marker's own reply never arrived: the marker may then not even be set yet by
  // its backend, still running on the server, so the answer waits until that backend is
  // gone (on the same server; after a failover the new primary holds only what reached it).
  Attempt ResolveCommit(const std::string& marker_id, uint64_t seq, const Status& why,
                        Clock::time_point deadline, const pg::Conn* unconfirmed = nullptr);
  // Whether the backend of the broken connection old still runs on the server c reaches
  // (false when c reaches another server). Sets *err when it cannot tell.
  bool StillRunning(pg::Conn& c, const pg::Conn& old, Status* err);
  // Calls attempt until it does not ask for a retry or the timeout passes.
  template <typename F>
  Status WithRetry(const char* what, F&& attempt);

  // A lost server breaks every running transaction at once; one warning per
  // kLostWarnInterval says enough.
  bool WarningDue(Clock::time_point now) {
    int64_t t = now.time_since_epoch().count();
    int64_t last = last_lost_warning_.load();
    return (last == 0 || t - last >= Clock::duration(kLostWarnInterval).count()) &&
           last_lost_warning_.compare_exchange_strong(last, t);
  }

  std::string Server() const {
    return "metadata server " + params_.where + " (database " + params_.database + ")";
  }

  const pg::Params params_;
  std::atomic<int64_t> last_lost_warning_{0};  // Clock ticks
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<pg::Conn>> idle_;  // guarded by pool_mu_
  std::vector<std::string> orphans_;             // marker ids to delete; guarded by pool_mu_
  // Markers whose planting was cut off, with when (kPlantSettle); guarded by pool_mu_.
  std::vector<std::pair<std::string, Clock::time_point>> settling_;
};

// Ends the transaction on conn without waiting; a connection that cannot even send is
// marked broken and will not be pooled.
void RollbackQuietly(pg::Conn& conn) {
  conn.QueueSql("ROLLBACK");
  (void)conn.SendOnly();
}

// Deletes the commit markers ids (of this client's closed connections) through conn, in a
// round trip of its own, and waits for the answer: sent without waiting, a deletion was
// lost whenever the new connection broke too (a failover in progress), and 13 primary kills
// in a 3-minute soak left 72 rows behind. Returns the ids whose rows are still locked by a
// transaction of a broken connection that the server has not ended yet (to be deleted
// later); ids without a row (a resolver deleted it) are done.
Result<std::vector<std::string>> DeleteMarkers(pg::Conn& conn, const std::vector<std::string>& ids) {
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  conn.QueueSql("BEGIN");
  conn.QueueSql("SET LOCAL synchronous_commit = local");  // no standby needed for hygiene
  // The main query sees the rows as they were before the CTE's deletion: present and not
  // deleted means locked.
  size_t i = conn.QueueSql(
      "WITH gone AS (DELETE FROM tierfs_commits WHERE id IN (SELECT id FROM tierfs_commits "
      "WHERE id = ANY(string_to_array($1, ',')) FOR UPDATE SKIP LOCKED) RETURNING id) "
      "SELECT coalesce(string_agg(id, ','), '') FROM tierfs_commits "
      "WHERE id = ANY(string_to_array($1, ',')) AND id NOT IN (SELECT id FROM gone)",
      {list});
  conn.QueueSql("COMMIT");
  std::vector<pg::ResultPtr> results;
  Status st = conn.RoundTrip(&results);
  if (!st.ok()) {
    if (!conn.broken()) RollbackQuietly(conn);
    return st.With("deleting the commit markers of closed connections");
  }
  std::vector<std::string> locked;
  std::string left = PQgetvalue(results[i].get(), 0, 0);
  for (size_t b = 0; b < left.size();) {
    size_t e = left.find(',', b);
    if (e == std::string::npos) e = left.size();
    locked.push_back(left.substr(b, e - b));
    b = e + 1;
  }
  return locked;
}

Status Ambiguous(const std::string& server, const Status& why) {
  return Status::Err(EIO, server +
                              ": the connection was lost while committing a metadata "
                              "transaction, which may or may not have been applied (" +
                              why.message() + ")");
}

template <typename F>
Status PostgresEngine::WithRetry(const char* what, F&& attempt) {
  const auto start = Clock::now();
  const auto deadline = start + TxnBudgetScope::Cap(params_.timeout);
  bool warned = false;
  bool reconnected = false;
  for (int n = 0;; ++n) {
    Attempt a = attempt(deadline);
    if (!a.retry) {
      if (warned) spdlog::info("{}: {} went through after {} retries", Server(), what, n);
      return std::move(a.status);
    }
    const bool conflict = a.status.code() == pg::kConflict;
    if (!conflict) DropIdle();
    auto now = Clock::now();
    if (now >= deadline) {
      auto secs =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count() / 1000.0;
      spdlog::error("{}: {} gave up after {} retries: {}", Server(), what, n, a.status.message());
      char took[32];
      snprintf(took, sizeof(took), "%.1f", secs);
      return Status::Err(
          EIO, Server() + ": " + what + " gave up after " + std::to_string(n + 1) +
                   " attempts in " + took + " s (?timeout= in the META-URL sets the limit): " +
                   (conflict ? "it kept conflicting with other clients; last: " : "") +
                   a.status.message());
    }
    if (!warned && (conflict ? now - start >= kWarnAfter : WarningDue(now))) {
      warned = true;
      spdlog::warn("{}: {} is being retried: {}", Server(), what, a.status.message());
    }
    // The first time a working connection breaks, a new one is tried at once: a single
    // killed session or network blip needs no pause; a server that is down does.
    if (a.status.code() == pg::kLost && !reconnected) {
      reconnected = true;
      continue;
    }
    auto pause = conflict ? JitteredBackoff(n, kConflictBackoffBase, kConflictBackoffCap)
                          : JitteredBackoff(n, kReconnectBackoffBase, kReconnectBackoffCap);
    auto left = std::chrono::duration_cast<microseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(pause, left));
  }
}

Status PostgresEngine::Init() {
  // Open fails fast when the server is unreachable or refuses us: a mistyped URL should not
  // hang for the whole timeout. Only "starting up" / "too many connections" are waited out.
  return WithRetry("opening", [&](Clock::time_point) -> Attempt {
    auto conn = pg::Conn::Open(params_, /*prepare=*/false);
    if (!conn.ok()) {
      if (conn.status().code() == EAGAIN) return Attempt::Retry(conn.status());
      return Attempt::Done(conn.status());
    }
    bool retry = false;
    Status st = InitSchema(**conn, &retry);
    if (retry) return Attempt::Retry(st);
    if (st.ok()) Release(std::move(*conn));
    return Attempt::Done(st);
  });
}

// Safe when a synchronous standby is streaming and a commit waits for it to flush
// (synchronous_commit on or remote_apply): the primary's loss then loses no acknowledged
// commit once a standby is promoted.
Result<DurabilityReport> PostgresEngine::Durability() {
  ASSIGN_OR_RETURN(auto conn, Acquire());
  std::vector<pg::ResultPtr> results;
  size_t i = conn->QueueSql(
      "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'), "
      "current_setting('fsync'), (SELECT count(*) FROM pg_stat_replication), "
      "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))");
  Status st = conn->RoundTrip(&results);
  if (!st.ok()) return st.With("reading the server's replication settings");
  Release(std::move(conn));
  const PGresult* r = results[i].get();
  if (PQntuples(r) != 1) return Status::Err(EIO, Server() + ": no answer to the replication settings query");
  std::string commit = PQgetvalue(r, 0, 0), names = PQgetvalue(r, 0, 1), fsync = PQgetvalue(r, 0, 2);
  long standbys = atol(PQgetvalue(r, 0, 3)), sync = atol(PQgetvalue(r, 0, 4));
  DurabilityReport d;
  d.summary = "PostgreSQL, synchronous_commit " + commit + ", " + std::to_string(standbys) + " standby(s) streaming, " +
              std::to_string(sync) + " synchronous";
  if (fsync == "off") d.risks.push_back("fsync off: a crash of the server's machine can lose or corrupt anything");
  if (sync == 0) {
    d.risks.push_back(names.empty() ? "no synchronous standby (synchronous_standby_names is empty): the "
                                      "primary's disk is the only sure copy of a commit"
                                    : "synchronous_standby_names is set but no synchronous standby is streaming: "
                                      "commits wait until one connects");
  }
  if (commit == "off" || commit == "local") {
    d.risks.push_back("synchronous_commit " + commit + ": a commit returns before a standby has it");
  } else if (commit == "remote_write") {
    d.risks.push_back("synchronous_commit remote_write: a standby has a commit in memory, not on disk");
  }
  d.safe = d.risks.empty();
  return d;
}

// CREATE TABLE IF NOT EXISTS name(columns). Another client may create it at the same
// moment: its CREATE wins, ours fails with a duplicate and is retried (*retry). A user who
// may not create it is told the statement and the grants an administrator must give.
Status PostgresEngine::CreateTable(pg::Conn& conn, const std::string& name, const std::string& columns,
                                   const std::string& grants, const std::string& what, bool* retry) {
  conn.QueueSql(("CREATE TABLE IF NOT EXISTS " + name + "(" + columns + ")").c_str());
  std::vector<pg::ResultPtr> results;
  Status st = conn.RoundTrip(&results);
  if (st.ok()) return st;
  const std::string& code = conn.last_sqlstate();
  *retry = st.code() == pg::kLost || code == "23505" || code == "42P07";
  if (code == "42501") {
    return Status::Err(EACCES, Server() + ": user " + params_.user + " may not create " + what + " " + name + " (" +
                                   st.message() + "); create it as an administrator: CREATE TABLE " + name + "(" +
                                   columns + "), and grant the user " + grants + " on it");
  }
  return st.With("creating " + what);
}

Status PostgresEngine::InitSchema(pg::Conn& conn, bool* retry) {
  std::vector<pg::ResultPtr> results;
  size_t i = conn.QueueSql(
      "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
      "WHERE a.attrelid = to_regclass('tierfs_kv') AND a.attnum > 0 AND NOT a.attisdropped "
      "ORDER BY a.attnum");
  size_t j = conn.QueueSql("SELECT to_regclass('tierfs_commits') IS NOT NULL");
  Status st = conn.RoundTrip(&results);
  if (!st.ok()) {
    *retry = st.code() == pg::kLost;
    return st.With("reading the metadata schema");
  }
  const bool have_commits = PQntuples(results[j].get()) == 1 && PQgetvalue(results[j].get(), 0, 0)[0] == 't';
  const PGresult* r = results[i].get();
  std::vector<std::string> columns;
  for (int row = 0; row < PQntuples(r); ++row) {
    columns.push_back(std::string(PQgetvalue(r, row, 0)) + " " + PQgetvalue(r, row, 1));
  }
  if (columns.empty()) {
    RETURN_IF_ERROR(CreateTable(conn, "tierfs_kv", "k bytea PRIMARY KEY, v bytea NOT NULL",
                                "SELECT, INSERT, UPDATE, DELETE, TRUNCATE", "the metadata table", retry));
    spdlog::info("{}: created the metadata table tierfs_kv", Server());
  } else if (columns != std::vector<std::string>{"k bytea", "v bytea"}) {
    std::string list;
    for (const auto& c : columns) list += (list.empty() ? "" : ", ") + c;
    return Status::Err(EINVAL, Server() +
                                   " has a table tierfs_kv that is not a TierFS metadata "
                                   "table (columns: " +
                                   list + "): use another database or schema");
  }
  if (!have_commits) {
    // The commit markers (postgres_engine.h), one row per open connection.
    RETURN_IF_ERROR(CreateTable(conn, "tierfs_commits", "id text PRIMARY KEY, seq int8 NOT NULL",
                                "SELECT, INSERT, UPDATE, DELETE", "the table of commit markers", retry));
  }
  st = conn.Prepare();
  if (!st.ok()) *retry = st.code() == pg::kLost;
  return st;
}

Result<std::unique_ptr<pg::Conn>> PostgresEngine::Acquire() {
  std::vector<std::string> orphans;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    const auto now = Clock::now();
    std::erase_if(settling_, [&](auto& p) {
      if (now - p.second < kPlantSettle || orphans_.size() >= kMaxOrphanMarkers) return false;
      orphans_.push_back(std::move(p.first));
      return true;
    });
    for (size_t i = 0; i < kOrphansPerCleanup && !orphans_.empty(); ++i) {
      orphans.push_back(std::move(orphans_.back()));
      orphans_.pop_back();
    }
  }
  std::string planted;
  auto conn = pg::Conn::Open(params_, /*prepare=*/true, &planted);
  if (!conn.ok()) {
    Requeue(std::move(orphans));
    if (!planted.empty()) {  // cut while planting its marker: the row may exist, or appear
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (settling_.size() < kMaxOrphanMarkers) settling_.emplace_back(std::move(planted), Clock::now());
    }
    return conn;
  }
  if (!orphans.empty()) {
    // A round trip on a new connection, which is rare: after a failover, or when the pool
    // grows.
    auto locked = DeleteMarkers(**conn, orphans);
    if (!locked.ok()) {
      Requeue(std::move(orphans));
      spdlog::debug("{}: {}", Server(), locked.status().message());
      if ((*conn)->broken()) {
        Retire(std::move(*conn));  // its own marker too
        return locked.status();    // kLost: the transaction is run again
      }
    } else {
      Requeue(std::move(*locked));
    }
  }
  return conn;
}

void PostgresEngine::Requeue(std::vector<std::string> ids) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  for (auto& id : ids) {
    if (orphans_.size() >= kMaxOrphanMarkers) break;
    orphans_.push_back(std::move(id));
  }
}

PostgresEngine::~PostgresEngine() {
  // The idle connections' own markers go too: their destructors' deletions are not waited
  // for. Tried through each idle connection until one works, else a new one; each bounded
  // by the timeout. A server that cannot be reached keeps the rows (a few dozen bytes each,
  // as when a client crashes).
  std::vector<std::string> ids = orphans_;
  for (auto& conn : idle_) ids.push_back(conn->marker_id());
  Clock::time_point settled{};
  for (auto& [id, when] : settling_) {
    ids.push_back(id);
    settled = std::max(settled, when + kPlantSettle);
  }
  if (ids.empty()) return;
  if (settled > Clock::now()) std::this_thread::sleep_until(settled);  // at most kPlantSettle
  auto through = [&](pg::Conn& c) {
    for (size_t b = 0; b < ids.size(); b += kOrphansPerCleanup) {
      std::vector<std::string> part(ids.begin() + b, ids.begin() + std::min(ids.size(), b + kOrphansPerCleanup));
      auto locked = DeleteMarkers(c, part);
      if (!locked.ok()) {
        spdlog::debug("{}: {}", Server(), locked.status().message());
        return false;
      }
    }
    return true;
  };
  for (auto& conn : idle_) {
    if (!conn->broken() && through(*conn)) return;
  }
  auto conn = pg::Conn::Open(params_, /*prepare=*/false);
  if (conn.ok()) (void)through(**conn);
}

void PostgresEngine::Release(std::unique_ptr<pg::Conn> conn) {
  if (!conn) return;
  // Connections opened for one question (ResolveCommit) lack the prepared statements.
  if (!conn->broken() && conn->queued() == 0 && conn->prepared()) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (idle_.size() < kMaxIdleConnections) {
      idle_.push_back(std::move(conn));
      return;
    }
  }
  Retire(std::move(conn));
}

void PostgresEngine::Retire(std::unique_ptr<pg::Conn> conn) {
  if (conn && conn->prepared()) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (orphans_.size() < kMaxOrphanMarkers) orphans_.push_back(conn->marker_id());
  }
  conn.reset();  // outside the lock: a working connection deletes its marker itself
}

void PostgresEngine::DropIdle() {
  std::vector<std::unique_ptr<pg::Conn>> dropped;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    dropped.swap(idle_);
  }
  for (auto& conn : dropped) Retire(std::move(conn));
}

Attempt PostgresEngine::RunOnce(pg::Conn& conn, const std::function<Status(KvTxn&)>& fn,
                                bool read_only, Clock::time_point deadline) {
  pg::Txn txn(conn, read_only);
  Status st = fn(txn);
  const Status& err = txn.error();
  if (!err.ok() || !st.ok()) {
    if (txn.begun()) RollbackQuietly(conn);
    if (!err.ok() && (err.code() == pg::kConflict || err.code() == pg::kLost)) {
      return Attempt::Retry(err);  // whatever the callback made of it
    }
    return Attempt::Done(st.ok() ? err : std::move(st));  // a failure the callback ignored
  }
  if (!txn.begun()) return Attempt::Done(Status::OK());  // nothing was sent

  if (read_only) {
    // The snapshot already answered everything; the COMMIT only ends it, so its reply is
    // not waited for (and a failure to send it only retires the connection).
    conn.QueueSql("COMMIT");
    (void)conn.SendOnly();
    return Attempt::Done(Status::OK());
  }

  // A connection that died while the callback ran is noticed now, before COMMIT is sent,
  // when running the transaction again is still safe.
  if (!conn.CheckAlive()) return Attempt::Retry(conn.lost());

  // The commit marker is set in a batch of its own right before COMMIT: the server flushes
  // that batch's replies before it runs COMMIT, so if the connection breaks during COMMIT
  // we know that the marker is part of the transaction and can look it up.
  size_t mark_index = SIZE_MAX;
  uint64_t mark_seq = 0;
  if (txn.wrote()) {
    mark_index = conn.QueueMark(&mark_seq);
    conn.EndBatch();
    // Broken while sending that batch: COMMIT is never sent, so the server rolls the
    // transaction back when it sees the connection gone, and running it again is safe.
    if (!conn.lost().ok()) return Attempt::Retry(conn.lost());
  }
  size_t commit_index = conn.QueueSql("COMMIT");
  std::vector<pg::ResultPtr> results;
  Status cs = conn.RoundTrip(&results);
  if (cs.ok()) {
    // COMMIT of a transaction that failed earlier answers ROLLBACK instead of an error.
    const char* tag = PQcmdStatus(results[commit_index].get());
    if (std::strcmp(tag, "COMMIT") != 0) {
      return Attempt::Done(Status::Err(EIO, Server() + ": COMMIT answered '" + tag + "'"));
    }
    return Attempt::Done(Status::OK());
  }
  if (cs.code() != pg::kLost) {
    RollbackQuietly(conn);  // the transaction may still be open, aborted
    if (cs.code() == pg::kConflict) return Attempt::Retry(cs);
    return Attempt::Done(cs);
  }
  // The connection broke around COMMIT.
  if (!txn.wrote()) return Attempt::Retry(cs);  // nothing to lose: just run it again
  // The server said it was ending the session (or that it is read-only) before the
  // marker's reply, so the transaction never got as far as a COMMIT that could succeed.
  if (conn.ended_by_server() && (mark_index >= results.size() || results[mark_index] == nullptr)) {
    return Attempt::Retry(cs);
  }
  if (mark_index < results.size() && results[mark_index] != nullptr) {
    return ResolveCommit(conn.marker_id(), mark_seq, cs, deadline);
  }
  // The marker's reply never came (the connection broke while sending, or before the
  // reply arrived): whether its batch, and COMMIT after it, ran is known once the backend
  // that had them is gone. A 3-minute Patroni soak had 2 of 14 primary kills end an
  // operation in EIO here ("may or may not have been applied") before this was asked.
  // A connection given up on by a timeout may still be open on the server's side: severed,
  // its backend ends at its next read (having committed or not) rather than stay listed.
  conn.Sever();
  return ResolveCommit(conn.marker_id(), mark_seq, cs, deadline, &conn);
}

bool PostgresEngine::StillRunning(pg::Conn& c, const pg::Conn& old, Status* err) {
  if (c.endpoint() != old.endpoint()) return false;
  if (old.backend_pid() == 0) return true;  // cannot tell: the caller gives up at its deadline
  std::vector<pg::ResultPtr> results;
  size_t i = c.QueueSql("SELECT count(*)::text FROM pg_stat_activity WHERE pid = $1",
                        {std::to_string(old.backend_pid())});
  *err = c.RoundTrip(&results);
  return !err->ok() || std::string(PQgetvalue(results[i].get(), 0, 0)) != "0";
}

Attempt PostgresEngine::ResolveCommit(const std::string& marker_id, uint64_t seq,
                                      const Status& why, Clock::time_point deadline,
                                      const pg::Conn* unconfirmed) {
  DropIdle();
  Status last = why;
  const std::string want = std::to_string(seq);
  for (int n = 0;; ++n) {
    // Through params_' host list, so after a failover this asks the new primary, whose
    // history holds the commit if and only if it was acknowledged by a synchronous standby
    // (the transaction's id would not do: one that never reached the standby may be given
    // to another transaction there). The row lock waits out a transaction still running on
    // a server that is alive (NOWAIT: asked again after a pause), and the marker, no longer
    // needed, goes in the same transaction.
    auto conn = pg::Conn::Open(params_, /*prepare=*/false);
    Status alive_err;
    if (conn.ok() && unconfirmed != nullptr && StillRunning(**conn, *unconfirmed, &alive_err)) {
      // Its backend may still set the marker and commit: ask again after a pause.
      if (!alive_err.ok() && alive_err.code() != pg::kLost && alive_err.code() != EBUSY) {
        return Attempt::Done(Ambiguous(Server(), alive_err));
      }
      last = alive_err.ok() ? why : alive_err;
    } else if (conn.ok()) {
      std::vector<pg::ResultPtr> results;
      pg::Conn& c = **conn;
      c.QueueSql("BEGIN");
      c.QueueSql("SET LOCAL synchronous_commit = local");  // the answer is the read
      size_t i = c.QueueSql("SELECT seq::text FROM tierfs_commits WHERE id = $1 FOR UPDATE NOWAIT", {marker_id});
      c.QueueSql("DELETE FROM tierfs_commits WHERE id = $1", {marker_id});
      c.QueueSql("COMMIT");
      Status st = c.RoundTrip(&results);
      if (st.ok()) {
        const PGresult* r = results[i].get();
        if (PQntuples(r) == 1 && want == PQgetvalue(r, 0, 0)) {
          spdlog::info("{}: the connection broke during COMMIT; the transaction did commit", Server());
          return Attempt::Done(Status::OK());
        }
        return Attempt::Retry(why);  // an older marker or none: nothing was applied, run it again
      }
      if (st.code() == EBUSY) {
        last = why;  // its backend is still finishing: ask again
      } else if (st.code() != pg::kLost) {
        return Attempt::Done(Ambiguous(Server(), st));
      } else {
        last = st;
      }
    } else if (!IsTransient(conn.status())) {
      return Attempt::Done(Ambiguous(Server(), conn.status()));
    } else {
      last = conn.status();
    }
    auto now = Clock::now();
    if (now >= deadline) return Attempt::Done(Ambiguous(Server(), last));
    auto left = std::chrono::duration_cast<microseconds>(deadline - now);
    std::this_thread::sleep_for(
        std::min(JitteredBackoff(n, kReconnectBackoffBase, kReconnectBackoffCap), left));
  }
}

Status PostgresEngine::Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) {
  if (TxnNesting::Inside(this)) {
    return Status::Err(EDEADLK, "nested transaction on metadata engine " + Describe() +
                                    " (programming error: it would deadlock)");
  }
  TxnNesting::Mark mark(this);
  return WithRetry(read_only ? "a read transaction" : "a write transaction",
                   [&](Clock::time_point deadline) -> Attempt {
                     auto conn = Acquire();
                     if (!conn.ok()) {
                       if (IsTransient(conn.status())) return Attempt::Retry(conn.status());
                       return Attempt::Done(conn.status());
                     }
                     Lease lease(this, std::move(*conn));
                     Attempt a = RunOnce(*lease, fn, read_only, deadline);
                     lease.Keep();  // not reached if fn threw
                     return a;
                   });
}

Status PostgresEngine::Reset() {
  if (TxnNesting::Inside(this)) {
    return Status::Err(EDEADLK, "Reset inside a transaction on metadata engine " + Describe() +
                                    " (programming error: it would deadlock)");
  }
  // Shorter than our own wait for a reply, so that a table held by another client comes
  // back as EBUSY rather than as a connection that stopped answering.
  const std::string lock_timeout =
      "SET LOCAL lock_timeout = " +
      std::to_string(std::max<int64_t>(1, params_.timeout.count() * 3 / 4));
  return WithRetry("clearing the metadata table", [&](Clock::time_point) -> Attempt {
    auto conn = Acquire();
    if (!conn.ok()) {
      if (IsTransient(conn.status())) return Attempt::Retry(conn.status());
      return Attempt::Done(conn.status());
    }
    Lease lease(this, std::move(*conn));
    pg::Conn& c = *lease;
    c.QueueSql("BEGIN");
    c.QueueSql(lock_timeout.c_str());
    c.QueueSql("TRUNCATE tierfs_kv");
    c.QueueSql("COMMIT");
    std::vector<pg::ResultPtr> results;
    Status st = c.RoundTrip(&results);
    lease.Keep();
    // TRUNCATE is idempotent, so a commit whose reply was lost is simply run again.
    if (st.ok()) return Attempt::Done(st);
    if (st.code() == pg::kLost) return Attempt::Retry(st);
    RollbackQuietly(c);
    if (st.code() == pg::kConflict) return Attempt::Retry(st);
    if (st.code() == EBUSY) {
      return Attempt::Done(Status::Err(
          EBUSY, Server() + ": other clients kept using the metadata table; unmount them first (" +
                     st.message() + ")"));
    }
    return Attempt::Done(st.With("clearing the metadata table"));
  });
}

}  // namespace

Result<std::unique_ptr<KvEngine>> OpenPostgresEngine(const Url& url) {
  ASSIGN_OR_RETURN(pg::Params params, pg::ParamsFromUrl(url));
  auto engine = std::make_unique<PostgresEngine>(std::move(params));
  RETURN_IF_ERROR(engine->Init());
  spdlog::debug("opened {}", engine->Describe());
  return std::unique_ptr<KvEngine>(std::move(engine));
}

}  // namespace tierfs
