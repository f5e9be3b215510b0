// The KvTxn of the SQLite engine, and where it keeps which keys.
//
// Two tables:
//   kv(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID   every key but the ones below
//   log(seq INTEGER PRIMARY KEY, v BLOB NOT NULL)           keys "H" + u64 (big-endian)
//                                                           below 2^63 - 1: the change log
// Why a second table: the change log's keys only ever grow, and SQLite splits a full page
// of a WITHOUT ROWID table (an index B-tree) in two halves even at its right edge, so an
// append-only range of it ends up half empty and every few commits pay a split (three or
// more more pages in the WAL). A rowid table appended to at its end splits by starting a new
// page and leaves the old one full. Measured with 10,000 creates (the size of 251-byte
// records): the log doubled the pages each commit wrote (2.8 -> 5.0 WAL frames per create)
// and made the file 2.9x as large; in its own table it adds one frame per create.
//
// The KvTxn contract is unchanged: one ordered key space. Get, Put and Delete of a log key
// go to `log`, every other key to `kv`; a Scan whose range meets the log's keys merges the
// two tables in key order.
//
// The first failure is sticky: SQLite may already have rolled the whole transaction back
// (e.g. on SQLITE_FULL or SQLITE_BUSY), and running further statements would then autocommit
// them one by one, so every later call returns the same error and nothing is committed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meta/sqlite_conn.h"

namespace tierfs::sqlite {

// The seq of a key stored in the log table, or nullopt for a key of the kv table.
std::optional<int64_t> LogSeq(std::string_view key);
// The log key of seq.
std::string LogKey(int64_t seq);
// The seqs [lo, hi) of the log keys in the key range [begin, end) (end empty: no bound).
struct SeqRange {
  int64_t lo = 0, hi = 0;
};
SeqRange LogSeqs(std::string_view begin, std::string_view end);

// A transaction on one connection between BEGIN and COMMIT/ROLLBACK.
class SqliteTxn final : public KvTxn {
 public:
  SqliteTxn(SqliteEngine::Conn& conn, const std::string& path, bool read_only)
      : c_(conn), path_(path), read_only_(read_only) {}

  bool conflict() const { return conflict_; }
  const Status& error() const { return error_; }

  Result<std::optional<std::string>> Get(std::string_view key) override;
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override;
  Status DeleteAll();

 private:
  // Up to want rows of each table from cursor on, below end.
  Status ReadKv(const std::string& cursor, std::string_view end, size_t want,
                std::vector<std::pair<std::string, std::string>>* rows);
  Status ReadLog(const std::string& cursor, std::string_view end, size_t want,
                 std::vector<std::pair<std::string, std::string>>* rows);
  Status CheckWritable();
  Status Fail(int rc, std::string_view what);

  SqliteEngine::Conn& c_;
  const std::string& path_;
  const bool read_only_;
  bool conflict_ = false;
  Status error_;
};

}  // namespace tierfs::sqlite
