// Internal to the SQLite engine (sqlite_engine.cc, sqlite_txn.cc): one connection with
// its prepared statements, and the helpers every statement uses (binding, errors).
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "meta/sqlite_engine.h"

namespace tierfs::sqlite {

bool IsConflict(int rc);
std::string NotOurs(const std::string& path, const std::string& why);
// Turns a SQLite failure into a Status with an errno and an actionable message.
Status SqlError(int rc, sqlite3* db, const std::string& path, std::string_view what);
// Binds a blob; an empty view must still bind a zero-length BLOB, never NULL.
int BindBlob(sqlite3_stmt* s, int index, std::string_view data);
std::string ColumnBlob(sqlite3_stmt* s, int col);
int StepOnce(sqlite3_stmt* s);

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

}  // namespace tierfs::sqlite

namespace tierfs {

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
  // The change log's table (sqlite_txn.h): log(seq INTEGER PRIMARY KEY, v BLOB NOT NULL).
  sqlite3_stmt* log_get = nullptr;
  sqlite3_stmt* log_put = nullptr;
  sqlite3_stmt* log_del = nullptr;
  sqlite3_stmt* log_del_all = nullptr;
  sqlite3_stmt* log_scan = nullptr;  // seq >= ?1 AND seq < ?2 LIMIT ?3

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    for (sqlite3_stmt* s : {begin_deferred, begin_immediate, commit, rollback, get, put, del,
                            del_all, scan_range, scan_open, log_get, log_put, log_del, log_del_all, log_scan}) {
      sqlite3_finalize(s);  // no-op on nullptr
    }
    // close_v2 also copes with a statement we failed to track.
    sqlite3_close_v2(db);
  }

  bool InTxn() const { return db != nullptr && sqlite3_get_autocommit(db) == 0; }

  // Ends any open transaction; a connection that cannot roll back is not reused.
  void RollbackIfOpen() {
    if (!InTxn()) return;
    int rc = rollback != nullptr ? sqlite::StepOnce(rollback)
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
        {&log_get, "SELECT v FROM log WHERE seq = ?1"},
        {&log_put, "INSERT INTO log(seq, v) VALUES(?1, ?2) ON CONFLICT(seq) DO UPDATE SET v = excluded.v"},
        {&log_del, "DELETE FROM log WHERE seq = ?1"},
        {&log_del_all, "DELETE FROM log"},
        {&log_scan, "SELECT seq, v FROM log WHERE seq >= ?1 AND seq < ?2 ORDER BY seq LIMIT ?3"},
    };
    for (const Item& item : items) {
      int rc = sqlite3_prepare_v3(db, item.sql, -1, SQLITE_PREPARE_PERSISTENT, item.stmt, nullptr);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
  }
};

}  // namespace tierfs
