#include "meta/sqlite_conn.h"

#include <cerrno>
#include <cstring>

namespace tierfs::sqlite {

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


int StepOnce(sqlite3_stmt* s) {
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  return rc;
}

}  // namespace tierfs::sqlite
