#include "meta/sqlite_engine.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "common/backoff.h"
#include "meta/sqlite_conn.h"
#include "meta/sqlite_txn.h"
#include "meta/txn_nesting.h"

namespace tierfs {

using namespace sqlite;  // NOLINT: the engine's own helpers

namespace {

// SQLite's own busy handler waits at most this long per lock attempt. It is kept short
// because SQLite's handler sleeps in coarse steps and does not add jitter; our retry loop
// (WithRetry) does the long waiting.
constexpr int kBusyTimeoutMs = 5;
// Total time a transaction keeps retrying on SQLITE_BUSY before failing with EIO.
constexpr std::chrono::seconds kMaxBusyWait(30);
constexpr std::chrono::microseconds kBackoffBase(200);
constexpr std::chrono::microseconds kBackoffCap(50'000);
// Retrying this long is unusual enough to log (once per transaction).
constexpr std::chrono::seconds kBusyWarnAfter(1);
// Connections kept open while idle; beyond this, released connections are closed.
constexpr size_t kMaxIdleConnections = 16;
// Marks a file as a TierFS metadata database ("TFM1").
constexpr int32_t kApplicationId = 0x54464d31;
// After a checkpoint, truncate the WAL file back to this size.
constexpr int64_t kJournalSizeLimit = 64LL << 20;
constexpr char kSqliteMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                   'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

std::chrono::microseconds Backoff(int attempt) { return JitteredBackoff(attempt, kBackoffBase, kBackoffCap); }

constexpr const char* kCreateLogTable = "CREATE TABLE log(seq INTEGER PRIMARY KEY, v BLOB NOT NULL);";

// Creates the log table and moves the log's keys from kv into it (sqlite_txn.h), inside
// the caller's transaction.
int MoveLogRows(sqlite3* db) {
  int rc = sqlite3_exec(db, kCreateLogTable, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return rc;
  sqlite3_stmt* sel = nullptr;
  sqlite3_stmt* ins = nullptr;
  rc = sqlite3_prepare_v2(db, "SELECT k, v FROM kv WHERE k >= x'48' AND k < x'49'", -1, &sel, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, "INSERT INTO log(seq, v) VALUES(?1, ?2)", -1, &ins, nullptr);
  size_t moved = 0;
  while (rc == SQLITE_OK && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    const auto seq = LogSeq(ColumnBlob(sel, 0));
    if (!seq) continue;
    std::string v = ColumnBlob(sel, 1);
    sqlite3_bind_int64(ins, 1, *seq);
    BindBlob(ins, 2, v);
    rc = StepOnce(ins);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    ++moved;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  sqlite3_finalize(sel);
  sqlite3_finalize(ins);
  if (rc == SQLITE_OK) {
    // Every 9-byte "H" key below 2^63 - 1 (LogSeq), i.e. every row just copied.
    rc = sqlite3_exec(db,
                      "DELETE FROM kv WHERE k >= x'48' AND k < x'49' AND length(k) = 9 AND "
                      "k < x'487fffffffffffffff'",
                      nullptr, nullptr, nullptr);
  }
  if (rc == SQLITE_OK && moved > 0) spdlog::info("moved {} change-log records into their own table", moved);
  return rc;
}

}  // namespace

struct SqliteEngine::Attempt {
  Status status;
  bool retry = false;
  static Attempt Done(Status s) { return Attempt{std::move(s), false}; }
  static Attempt Retry() { return Attempt{Status::OK(), true}; }
};

// Returns a connection to the pool when the transaction attempt ends, rolling back first
// if the attempt left a transaction open (e.g. the callback threw).
class SqliteEngine::Lease {
 public:
  Lease(SqliteEngine* engine, std::unique_ptr<Conn> conn)
      : engine_(engine), conn_(std::move(conn)) {}
  ~Lease() {
    conn_->RollbackIfOpen();
    engine_->Release(std::move(conn_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Conn& operator*() { return *conn_; }

 private:
  SqliteEngine* engine_;
  std::unique_ptr<Conn> conn_;
};

namespace {

// The database holds every name of the volume and the object store's keys: a copy readable
// by other local users gives them away (`tierfs dump --keep-secret-key` of the copy).
void WarnIfReadableByOthers(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::string p = path + suffix;
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || (st.st_mode & 044) == 0) continue;
    spdlog::warn("metadata database file {} is readable by other users (mode {:04o}): it holds every file name "
                 "and the object store's keys; make it private with `chmod 600 {}*`",
                 p, static_cast<unsigned>(st.st_mode & 07777), path);
  }
}

}  // namespace

SqliteEngine::SqliteEngine(std::string path, std::string abs_path, bool create)
    : path_(std::move(path)), abs_path_(std::move(abs_path)), create_(create) {}

SqliteEngine::~SqliteEngine() = default;

Result<std::unique_ptr<SqliteEngine>> SqliteEngine::Open(const std::string& path, bool create) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return Status::Err(EINVAL, "empty SQLite database path: expected sqlite3://PATH");
  }
  fs::path p(path);
  std::string parent = p.parent_path().string();
  if (parent.empty()) parent = ".";
  struct stat st;
  if (stat(parent.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return Status::Err(ENOENT, "cannot open metadata database " + path + ": directory " + parent +
                                     " does not exist; create it first or choose another path");
    }
    return Status::Err(err, "cannot open metadata database " + path + ": cannot access directory " +
                                parent + ": " + std::strerror(err));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Err(
        ENOTDIR, "cannot open metadata database " + path + ": " + parent + " is not a directory");
  }

  // Check an existing file before SQLite touches it, so a wrong path never gets a WAL file
  // or a journal-mode change, and the user gets a precise message.
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::Err(EISDIR, "metadata database " + path +
                                     " is a directory; expected sqlite3://PATH to a file");
    }
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      return Status::Err(err, "cannot read metadata database " + path + ": " + std::strerror(err) +
                                  "; check the file's permissions");
    }
    char header[sizeof(kSqliteMagic)];
    ssize_t n = pread(fd, header, sizeof(header), 0);
    int err = errno;
    close(fd);
    if (n < 0) {
      return Status::Err(err, "cannot read metadata database " + path + ": " + std::strerror(err));
    }
    // A zero-length file is a valid empty database (SQLite itself creates files that way).
    if (n > 0 && (static_cast<size_t>(n) < sizeof(header) ||
                  std::memcmp(header, kSqliteMagic, sizeof(header)) != 0)) {
      return Status::Err(EINVAL, NotOurs(path, "not an SQLite file"));
    }
    WarnIfReadableByOthers(path);
  } else if (errno == ENOENT && !create) {
    return Status::Err(ENOENT, "metadata database " + path +
                                   " does not exist: no TierFS volume there (check the path, or create a "
                                   "volume with `tierfs format`)");
  } else if (errno == ENOENT) {
    // Created here, private to its owner: it holds every name of the volume and the object
    // store's keys. SQLite gives the -wal and -shm files the database file's mode.
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
    } else if (errno != EEXIST) {
      int err = errno;
      return Status::Err(err, "cannot create metadata database " + path + ": " + std::strerror(err));
    }
  }

  // Resolved now: a daemon may chdir("/") later, and connections open lazily.
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) {
    return Status::Err(ec.value(),
                       "cannot resolve metadata database path " + path + ": " + ec.message());
  }
  std::unique_ptr<SqliteEngine> engine(new SqliteEngine(path, abs.string(), create));
  RETURN_IF_ERROR(engine->InitSchema());
  spdlog::debug("opened metadata database {} (SQLite {})", abs.string(), sqlite3_libversion());
  return engine;
}

std::string SqliteEngine::Describe() const { return "sqlite3://" + path_; }

SqliteEngine::Attempt SqliteEngine::OpenMain() {
  if (main_) return Attempt::Done(Status::OK());
  return OpenConn(true, &main_);
}

Result<DurabilityReport> SqliteEngine::Durability() {
  return DurabilityReport{false, "embedded SQLite at " + path_ + " (WAL, synchronous=NORMAL)",
                          {"the database is one file on this machine: losing the machine or its disk loses the "
                           "volume's metadata (mount --backup-meta keeps copies in the object store; a shared "
                           "volume belongs on a replicated engine such as etcd)"}};
}

Status SqliteEngine::Sync() {
  // Through SQLite's own file handles: opening and closing the files here would drop every
  // POSIX lock this process holds on them (fcntl locks belong to the process and file, not
  // the descriptor), and another process could then delete the log under us.
  std::lock_guard<std::mutex> lock(write_mu_);
  Attempt opened = OpenMain();
  if (!opened.status.ok()) return opened.status;
  if (opened.retry) return Status::Err(EIO, "metadata database " + path_ + " busy while syncing");
  sqlite3* db = main_->db;
  sqlite3_file* wal = nullptr;
  sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
  if (!wal || !wal->pMethods) {
    // This connection has not read since it opened: a read opens the log.
    int rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqlError(rc, db, path_, "opening the log to sync it");
    sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
  }
  sqlite3_file* main_file = nullptr;
  sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &main_file);
  // The log holds the commits since the last checkpoint; a checkpoint syncs the database
  // file before the log is reused. Syncing the log and then the file covers both.
  for (sqlite3_file* f : {wal, main_file}) {
    if (!f || !f->pMethods) continue;
    int rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL | SQLITE_SYNC_DATAONLY);
    if (rc != SQLITE_OK) {
      return Status::Err(EIO, "syncing metadata database " + path_ + " to disk failed (SQLite error " +
                                  std::to_string(rc) + ")");
    }
  }
  return Status::OK();
}

template <typename F>
Status SqliteEngine::WithRetry(const char* what, F&& attempt) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  bool warned = false;
  for (int n = 0;; ++n) {
    Attempt a = attempt();
    if (!a.retry) {
      if (warned)
        spdlog::info("metadata database {}: {} went through after {} retries", path_, what, n);
      return std::move(a.status);
    }
    auto elapsed = Clock::now() - start;
    if (elapsed >= kMaxBusyWait) {
      spdlog::error("metadata database {}: {} still busy after {} retries", path_, what, n);
      return Status::Err(EIO,
                         "metadata database " + path_ + " busy for too long (" +
                             std::to_string(kMaxBusyWait.count()) + " s) during " + what +
                             ": another process keeps it locked; look for a hung tierfs process");
    }
    if (!warned && elapsed >= kBusyWarnAfter) {
      warned = true;
      spdlog::warn("metadata database {}: {} is waiting for a lock held by another process", path_,
                   what);
    }
    auto remaining = std::chrono::duration_cast<std::chrono::microseconds>(kMaxBusyWait - elapsed);
    std::this_thread::sleep_for(std::min(Backoff(n), remaining));
  }
}

SqliteEngine::Attempt SqliteEngine::OpenConn(bool prepare, std::unique_ptr<Conn>* out) {
  // SQLite counts its allocations under one process-wide mutex unless told not to: a
  // thread forked away in the middle of an allocation (the Python SDK's DataLoader
  // workers) would leave that mutex held in the child, whose own engine then hangs on its
  // first allocation. We read no memory statistics. Too late (SQLITE_MISUSE) when the
  // process used SQLite before (Python's sqlite3 module): then nothing changes.
  static std::once_flag no_memstatus;
  std::call_once(no_memstatus, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto conn = std::make_unique<Conn>();
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create_ ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(abs_path_.c_str(), &conn->db, flags, nullptr);
  if (rc != SQLITE_OK) return Attempt::Done(SqlError(rc, conn->db, path_, "opening the database"));
  sqlite3_extended_result_codes(conn->db, 1);
  sqlite3_busy_timeout(conn->db, kBusyTimeoutMs);
  // synchronous=NORMAL in WAL mode: see the durability note in sqlite_engine.h.
  std::string pragmas =
      "PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=" + std::to_string(kJournalSizeLimit) +
      ";";
  rc = sqlite3_exec(conn->db, pragmas.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK && prepare) rc = conn->Prepare();
  if (IsConflict(rc)) return Attempt::Retry();
  if (rc != SQLITE_OK)
    return Attempt::Done(SqlError(rc, conn->db, path_, "setting up a connection"));
  *out = std::move(conn);
  return Attempt::Done(Status::OK());
}

SqliteEngine::Attempt SqliteEngine::Acquire(std::unique_ptr<Conn>* out) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      *out = std::move(idle_.back());
      idle_.pop_back();
      return Attempt::Done(Status::OK());
    }
  }
  return OpenConn(true, out);
}

void SqliteEngine::Release(std::unique_ptr<Conn> conn) {
  if (!conn || conn->broken || conn->InTxn()) return;  // closed by the destructor
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
}

Status SqliteEngine::InitSchema() {
  auto attempt = [this]() -> Attempt {
    std::unique_ptr<Conn> conn;
    Attempt a = OpenConn(false, &conn);
    if (a.retry || !a.status.ok()) return a;
    sqlite3* db = conn->db;
    auto exec = [db](const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); };
    auto fail = [&](int rc, const char* what) -> Attempt {
      conn->RollbackIfOpen();
      if (IsConflict(rc)) return Attempt::Retry();
      return Attempt::Done(SqlError(rc, db, path_, what));
    };

    int rc = exec("BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return fail(rc, "locking the database");

    // Read the marker and table list; nothing is written unless the database is empty.
    int64_t app_id = 0;
    std::vector<std::string> tables;
    {
      sqlite3_stmt* s = nullptr;
      rc = sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &s, nullptr);
      if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
          app_id = sqlite3_column_int64(s, 0);
          rc = SQLITE_OK;
        }
      }
      sqlite3_finalize(s);
      if (rc != SQLITE_OK && rc != SQLITE_DONE) return fail(rc, "reading the database header");
      s = nullptr;
      rc = sqlite3_prepare_v2(
          db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &s, nullptr);
      if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
          tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
        }
      }
      sqlite3_finalize(s);
      if (rc != SQLITE_DONE) return fail(rc, "reading the database schema");
    }

    bool has_kv = std::find(tables.begin(), tables.end(), "kv") != tables.end();
    bool has_log = std::find(tables.begin(), tables.end(), "log") != tables.end();
    if (tables.empty() && app_id == 0) {
      std::string create =
          "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID; " + std::string(kCreateLogTable) +
          " PRAGMA application_id=" + std::to_string(kApplicationId) + ";";
      rc = exec(create.c_str());
      if (rc != SQLITE_OK) return fail(rc, "creating the metadata table");
    } else if (app_id == kApplicationId && has_kv && !has_log) {
      // A database from before the log had its own table: its change-log records move there.
      rc = MoveLogRows(db);
      if (rc != SQLITE_OK) return fail(rc, "moving the change log into its own table");
    } else if (app_id != kApplicationId || !has_kv) {
      conn->RollbackIfOpen();
      std::string list;
      for (const auto& t : tables) list += (list.empty() ? "" : ", ") + t;
      return Attempt::Done(
          Status::Err(EINVAL, NotOurs(path_, "an SQLite database of another application, tables: " +
                                                 (list.empty() ? std::string("none") : list))));
    }
    rc = exec("COMMIT");
    if (rc != SQLITE_OK) return fail(rc, "committing the metadata table");

    // Only now that the file is known to be ours may its journal mode change.
    sqlite3_stmt* s = nullptr;
    rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(s, 0);
        mode = text != nullptr ? reinterpret_cast<const char*>(text) : "";
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) return fail(rc, "switching to WAL mode");
    if (mode != "wal") {
      // Still correct (SQLite falls back to a rollback journal), only slower.
      spdlog::warn(
          "metadata database {}: WAL mode unavailable (journal mode is '{}'); is it on a network "
          "file system?",
          path_, mode);
    }

    rc = conn->Prepare();
    if (rc != SQLITE_OK) return fail(rc, "preparing statements");
    Release(std::move(conn));
    return Attempt::Done(Status::OK());
  };
  return WithRetry("opening", attempt);
}

SqliteEngine::Attempt SqliteEngine::RunOnce(Conn& conn, const std::function<Status(KvTxn&)>& fn,
                                            bool read_only) {
  int rc = StepOnce(read_only ? conn.begin_deferred : conn.begin_immediate);
  if (rc != SQLITE_DONE) {
    if (IsConflict(rc)) return Attempt::Retry();
    conn.broken = true;
    return Attempt::Done(SqlError(rc, conn.db, path_, "starting a transaction"));
  }
  // Rolls back on every path that does not commit, including an exception from fn, while
  // the caller still holds the write mutex.
  struct RollbackGuard {
    Conn& c;
    ~RollbackGuard() { c.RollbackIfOpen(); }
  } guard{conn};

  SqliteTxn txn(conn, path_, read_only);
  Status st = fn(txn);
  if (txn.conflict()) return Attempt::Retry();  // whatever fn made of the EAGAIN
  if (!st.ok()) return Attempt::Done(std::move(st));
  if (!txn.error().ok()) return Attempt::Done(txn.error());  // fn ignored a failure

  rc = StepOnce(conn.commit);
  if (rc == SQLITE_DONE) return Attempt::Done(Status::OK());
  if (IsConflict(rc)) return Attempt::Retry();
  conn.broken = true;
  return Attempt::Done(SqlError(rc, conn.db, path_, "committing a transaction"));
}

Status SqliteEngine::Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) {
  if (TxnNesting::Inside(this)) {
    return Status::Err(EDEADLK, "nested transaction on metadata engine " + Describe() +
                                    " (programming error: it would deadlock)");
  }
  TxnNesting::Mark mark(this);
  auto on_main = [&](bool read) -> Attempt {
    Attempt opened = OpenMain();
    if (opened.retry || !opened.status.ok()) return opened;
    Attempt a = RunOnce(*main_, fn, read);
    if (main_->broken || main_->InTxn()) main_.reset();
    return a;
  };
  if (!read_only) {
    return WithRetry("a write transaction", [&]() -> Attempt {
      std::lock_guard<std::mutex> lock(write_mu_);
      return on_main(false);
    });
  }
  return WithRetry("a read transaction", [&]() -> Attempt {
    {
      std::unique_lock<std::mutex> lock(write_mu_, std::try_to_lock);
      if (lock.owns_lock()) return on_main(true);
    }
    std::unique_ptr<Conn> conn;
    Attempt a = Acquire(&conn);
    if (a.retry || !a.status.ok()) return a;
    Lease lease(this, std::move(conn));
    return RunOnce(*lease, fn, true);
  });
}

Status SqliteEngine::Reset() {
  return Txn([](KvTxn& txn) { return static_cast<SqliteTxn&>(txn).DeleteAll(); });
}

}  // namespace tierfs
