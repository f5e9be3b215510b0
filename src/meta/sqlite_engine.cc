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
#include <random>
#include <thread>
#include <utility>

#include "common/backoff.h"
#include "meta/txn_nesting.h"

namespace tierfs {

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
// GetMany merges the keys with one range scan over them when they lie close together,
// reading at most this many rows a key before it falls back to one Get a key: a statement
// per key costs its own reset, bind, seek and step, a scanned row only a step (a gateway
// listing's page reads the attributes and an xattr of 1,000 neighbouring inodes).
constexpr size_t kGetManyScanRows = 4;
constexpr size_t kGetManyScanStart = 32;
constexpr size_t kGetManyScanStep = 64;
// Fewer keys than this are read one Get at a time.
constexpr size_t kGetManyMin = 16;

// Scan reads rows in batches so the callback can use the transaction (Get, Put, ...)
// while no statement of the scan is being stepped.
constexpr size_t kScanBatch = 256;
// Marks a file as a TierFS metadata database ("TFM1").
constexpr int32_t kApplicationId = 0x54464d31;
// After a checkpoint, truncate the WAL file back to this size.
constexpr int64_t kJournalSizeLimit = 64LL << 20;
constexpr char kSqliteMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                   'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

bool IsConflict(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

std::string NotOurs(const std::string& path, const std::string& why) {
  return "metadata database " + path + " is not a TierFS metadata database (" + why +
         "): point the META-URL at a TierFS metadata file or at a new path";
}

// Turns a SQLite failure into a Status with an errno and an actionable message.
Status SqlError(int rc, sqlite3* db, const std::string& path, std::string_view what) {
  std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int sys = db != nullptr ? sqlite3_system_errno(db) : 0;
  std::string where = "metadata database " + path + ": " + std::string(what) + " failed: " + detail;
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return Status::Err(ENOSPC,
                         where + "; the file system holding the database is full: free some space");
    case SQLITE_NOTADB:
      return Status::Err(EINVAL, NotOurs(path, "not an SQLite file"));
    case SQLITE_READONLY:
      return Status::Err(
          EROFS, where + "; check that the file and its directory are writable by this user");
    case SQLITE_CANTOPEN:
      return Status::Err(
          sys != 0 ? sys : EACCES,
          where + "; check that the path exists and is readable and writable by this user");
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Status::Err(EACCES, where);
    case SQLITE_NOMEM:
      return Status::Err(ENOMEM, where);
    case SQLITE_TOOBIG:
      return Status::Err(EFBIG, where + "; a metadata key or value exceeds SQLite's size limit");
    case SQLITE_CORRUPT:
      return Status::Err(
          EIO, where + "; the database file is corrupt: restore it from a metadata backup");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Err(EAGAIN, where);
    case SQLITE_IOERR:
      if (sys != 0) where += std::string(" (") + std::strerror(sys) + ")";
      return Status::Err(EIO, where);
    default:
      return Status::Err(EIO, where);
  }
}

std::chrono::microseconds Backoff(int attempt) { return JitteredBackoff(attempt, kBackoffBase, kBackoffCap); }

// Binds a blob; an empty view must still bind a zero-length BLOB, never NULL.
int BindBlob(sqlite3_stmt* s, int index, std::string_view data) {
  return sqlite3_bind_blob64(s, index, data.empty() ? "" : data.data(), data.size(), SQLITE_STATIC);
}

std::string ColumnBlob(sqlite3_stmt* s, int col) {
  const void* p = sqlite3_column_blob(s, col);
  int n = sqlite3_column_bytes(s, col);
  if (p == nullptr || n <= 0) return std::string();
  return std::string(static_cast<const char*>(p), static_cast<size_t>(n));
}

// Resets a statement (and drops its bindings, which point at caller memory) on scope exit.
class StmtReset {
 public:
  explicit StmtReset(sqlite3_stmt* s) : s_(s) {}
  ~StmtReset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StmtReset(const StmtReset&) = delete;
  StmtReset& operator=(const StmtReset&) = delete;

 private:
  sqlite3_stmt* s_;
};

int StepOnce(sqlite3_stmt* s) {
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  return rc;
}

}  // namespace

struct SqliteEngine::Attempt {
  Status status;
  bool retry = false;
  static Attempt Done(Status s) { return Attempt{std::move(s), false}; }
  static Attempt Retry() { return Attempt{Status::OK(), true}; }
};

// One database connection with its prepared statements. Used by one thread at a time
// (opened with SQLITE_OPEN_NOMUTEX); the pool hands it out.
struct SqliteEngine::Conn {
  sqlite3* db = nullptr;
  // Set after an error that may leave the connection in an unknown state; such a
  // connection is closed instead of returned to the pool.
  bool broken = false;

  sqlite3_stmt* begin_deferred = nullptr;
  sqlite3_stmt* begin_immediate = nullptr;
  sqlite3_stmt* commit = nullptr;
  sqlite3_stmt* rollback = nullptr;
  sqlite3_stmt* get = nullptr;
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_stmt* del_all = nullptr;
  sqlite3_stmt* scan_range = nullptr;  // k >= ?1 AND k < ?2 LIMIT ?3
  sqlite3_stmt* scan_open = nullptr;   // k >= ?1 LIMIT ?2

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    for (sqlite3_stmt* s : {begin_deferred, begin_immediate, commit, rollback, get, put, del,
                            del_all, scan_range, scan_open}) {
      sqlite3_finalize(s);  // no-op on nullptr
    }
    // close_v2 also copes with a statement we failed to track.
    sqlite3_close_v2(db);
  }

  bool InTxn() const { return db != nullptr && sqlite3_get_autocommit(db) == 0; }

  // Ends any open transaction; a connection that cannot roll back is not reused.
  void RollbackIfOpen() {
    if (!InTxn()) return;
    int rc = rollback != nullptr ? StepOnce(rollback)
                                 : sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    if (rc != SQLITE_DONE && rc != SQLITE_OK) broken = true;
    if (InTxn()) broken = true;
  }

  int Prepare() {
    struct Item {
      sqlite3_stmt** stmt;
      const char* sql;
    };
    const Item items[] = {
        {&begin_deferred, "BEGIN"},
        {&begin_immediate, "BEGIN IMMEDIATE"},
        {&commit, "COMMIT"},
        {&rollback, "ROLLBACK"},
        {&get, "SELECT v FROM kv WHERE k = ?1"},
        {&put, "INSERT INTO kv(k, v) VALUES(?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v"},
        {&del, "DELETE FROM kv WHERE k = ?1"},
        {&del_all, "DELETE FROM kv"},
        {&scan_range, "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT ?3"},
        {&scan_open, "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2"},
    };
    for (const Item& item : items) {
      int rc = sqlite3_prepare_v3(db, item.sql, -1, SQLITE_PREPARE_PERSISTENT, item.stmt, nullptr);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
  }
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

// A transaction on one connection between BEGIN and COMMIT/ROLLBACK. The first failure
// is sticky: SQLite may already have rolled the whole transaction back (e.g. on
// SQLITE_FULL or SQLITE_BUSY), and running further statements would then autocommit them
// one by one, so every later call returns the same error and nothing is committed.
class SqliteTxn final : public KvTxn {
 public:
  SqliteTxn(SqliteEngine::Conn& conn, const std::string& path, bool read_only)
      : c_(conn), path_(path), read_only_(read_only) {}

  bool conflict() const { return conflict_; }
  const Status& error() const { return error_; }

  Result<std::optional<std::string>> Get(std::string_view key) override {
    if (!error_.ok()) return error_;
    sqlite3_stmt* s = c_.get;
    StmtReset reset(s);
    int rc = BindBlob(s, 1, key);
    if (rc != SQLITE_OK) return Fail(rc, "binding a key");
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return std::optional<std::string>(ColumnBlob(s, 0));
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    return Fail(rc, "reading a key");
  }

  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    if (keys.size() < kGetManyMin) return KvTxn::GetMany(keys);
    if (!error_.ok()) return error_;
    std::vector<std::optional<std::string>> out(keys.size());
    // The keys in order, with their positions; a range scan from the first to the last is
    // merged with them while it reads at most kGetManyScanRows rows (plus a start-up
    // allowance) for each key it passed (keys written together, like an inode's attributes
    // and xattrs and those of its neighbours, sit close; keys far apart stop the scan
    // early, having cost a few steps). Those the scan did not reach are read one by one.
    std::vector<std::pair<std::string_view, size_t>> order;
    order.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) order.emplace_back(keys[i], i);
    if (!std::is_sorted(order.begin(), order.end())) std::sort(order.begin(), order.end());
    std::string end(order.back().first);
    end.push_back('\0');
    size_t next = 0, rows = 0;
    bool cut = false;
    // In steps of kGetManyScanStep rows (one statement each), so that a sparse set stops
    // having read few rows.
    std::string from(order.front().first);
    for (;;) {
      size_t got = 0;
      RETURN_IF_ERROR(Scan(from, end, kGetManyScanStep, [&](std::string_view k, std::string_view v) {
        ++got;
        if (++rows > kGetManyScanRows * next + kGetManyScanStart) {
          cut = true;  // sparse: the rest one by one
          return false;
        }
        while (next < order.size() && order[next].first < k) ++next;  // absent
        for (; next < order.size() && order[next].first == k; ++next) out[order[next].second] = std::string(v);
        from.assign(k);
        from.push_back('\0');
        return next < order.size();
      }));
      if (cut) break;
      // Every key reached, or the range ended (the rest are absent).
      if (next == order.size() || got < kGetManyScanStep) return out;
    }
    for (; next < order.size(); ++next) {
      ASSIGN_OR_RETURN(out[order[next].second], Get(order[next].first));
    }
    return out;
  }

  Status Put(std::string_view key, std::string_view value) override {
    RETURN_IF_ERROR(CheckWritable());
    sqlite3_stmt* s = c_.put;
    StmtReset reset(s);
    int rc = BindBlob(s, 1, key);
    if (rc == SQLITE_OK) rc = BindBlob(s, 2, value);
    if (rc != SQLITE_OK) return Fail(rc, "binding a key or value");
    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return Fail(rc, "writing a key");
    return Status::OK();
  }

  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(CheckWritable());
    sqlite3_stmt* s = c_.del;
    StmtReset reset(s);
    int rc = BindBlob(s, 1, key);
    if (rc != SQLITE_OK) return Fail(rc, "binding a key");
    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return Fail(rc, "deleting a key");
    return Status::OK();
  }

  Status Scan(std::string_view begin, std::string_view end, size_t limit,
              const ScanFn& fn) override {
    if (!error_.ok()) return error_;
    if (!end.empty() && begin >= end) return Status::OK();
    std::string cursor(begin);
    size_t visited = 0;
    std::vector<std::pair<std::string, std::string>> rows;
    rows.reserve(kScanBatch);
    for (;;) {
      if (!error_.ok()) return error_;  // a Get/Put inside the callback failed
      size_t want = kScanBatch;
      if (limit != 0) want = std::min(want, limit - visited);
      rows.clear();
      {
        sqlite3_stmt* s = end.empty() ? c_.scan_open : c_.scan_range;
        StmtReset reset(s);
        int rc = BindBlob(s, 1, cursor);
        int limit_index = 2;
        if (rc == SQLITE_OK && !end.empty()) {
          rc = BindBlob(s, 2, end);
          limit_index = 3;
        }
        if (rc == SQLITE_OK)
          rc = sqlite3_bind_int64(s, limit_index, static_cast<sqlite3_int64>(want));
        if (rc != SQLITE_OK) return Fail(rc, "binding scan bounds");
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
          rows.emplace_back(ColumnBlob(s, 0), ColumnBlob(s, 1));
        if (rc != SQLITE_DONE) return Fail(rc, "scanning keys");
      }
      for (const auto& [k, v] : rows) {
        ++visited;
        if (!fn(k, v)) return Status::OK();
      }
      if (rows.size() < want) return Status::OK();  // range exhausted
      if (limit != 0 && visited >= limit) return Status::OK();
      // The smallest key after the last one seen.
      cursor = rows.back().first;
      cursor.push_back('\0');
    }
  }

  Status DeleteAll() {
    RETURN_IF_ERROR(CheckWritable());
    int rc = StepOnce(c_.del_all);
    if (rc != SQLITE_DONE) return Fail(rc, "deleting all keys");
    return Status::OK();
  }

 private:
  Status CheckWritable() {
    if (!error_.ok()) return error_;
    if (read_only_) {
      // Sticky too: a read-only transaction that tried to write must not report success.
      error_ =
          Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)");
      return error_;
    }
    return Status::OK();
  }

  Status Fail(int rc, std::string_view what) {
    if (IsConflict(rc)) {
      conflict_ = true;
      error_ = Status::Err(EAGAIN, "metadata transaction on " + path_ +
                                       " conflicted with another writer; it will be retried");
    } else {
      c_.broken = true;
      error_ = SqlError(rc, c_.db, path_, what);
    }
    return error_;
  }

  SqliteEngine::Conn& c_;
  const std::string& path_;
  const bool read_only_;
  bool conflict_ = false;
  Status error_;
};

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
    if (tables.empty() && app_id == 0) {
      std::string create =
          "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID; PRAGMA "
          "application_id=" +
          std::to_string(kApplicationId) + ";";
      rc = exec(create.c_str());
      if (rc != SQLITE_OK) return fail(rc, "creating the metadata table");
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
