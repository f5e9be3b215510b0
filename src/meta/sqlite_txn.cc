#include "meta/sqlite_txn.h"

#include <algorithm>
#include <climits>

#include "common/encoding.h"

namespace tierfs::sqlite {

namespace {

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


constexpr char kLogPrefix = 'H';
constexpr int64_t kNoSeq = INT64_MAX;  // log seqs are below it

// The first 8 bytes of b as a big-endian number, b padded with zeros when shorter.
uint64_t Padded(std::string_view b) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | (i < b.size() ? static_cast<uint8_t>(b[i]) : 0);
  return v;
}

int64_t Clamp(uint64_t v) { return v >= static_cast<uint64_t>(kNoSeq) ? kNoSeq : static_cast<int64_t>(v); }

// The seq of the first log key at or after the key k.
int64_t FirstSeqFrom(std::string_view k) {
  if (k.empty() || k[0] < kLogPrefix) return 0;
  if (k[0] > kLogPrefix) return kNoSeq;
  std::string_view b = k.substr(1);
  if (b.size() <= 8) return Clamp(Padded(b));
  // Longer than a log key: the log key of its first 8 bytes is a prefix of it, so smaller.
  uint64_t v = Padded(b);
  return v == UINT64_MAX ? kNoSeq : Clamp(v + 1);
}

}  // namespace

std::optional<int64_t> LogSeq(std::string_view key) {
  if (key.size() != 9 || key[0] != kLogPrefix) return std::nullopt;
  uint64_t v = Padded(key.substr(1));
  if (v >= static_cast<uint64_t>(kNoSeq)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string LogKey(int64_t seq) {
  std::string k(1, kLogPrefix);
  PutU64(&k, static_cast<uint64_t>(seq));
  return k;
}

SeqRange LogSeqs(std::string_view begin, std::string_view end) {
  SeqRange r;
  r.lo = FirstSeqFrom(begin);
  r.hi = end.empty() ? kNoSeq : FirstSeqFrom(end);
  if (r.hi < r.lo) r.hi = r.lo;
  return r;
}

Result<std::optional<std::string>> SqliteTxn::Get(std::string_view key) {
  if (!error_.ok()) return error_;
  const auto seq = LogSeq(key);
  sqlite3_stmt* s = seq ? c_.log_get : c_.get;
  StmtReset reset(s);
  int rc = seq ? sqlite3_bind_int64(s, 1, *seq) : BindBlob(s, 1, key);
  if (rc != SQLITE_OK) return Fail(rc, "binding a key");
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return std::optional<std::string>(ColumnBlob(s, 0));
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  return Fail(rc, "reading a key");
}

Result<std::vector<std::optional<std::string>>> SqliteTxn::GetMany(const std::vector<std::string>& keys) {
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


Status SqliteTxn::Put(std::string_view key, std::string_view value) {
  RETURN_IF_ERROR(CheckWritable());
  const auto seq = LogSeq(key);
  sqlite3_stmt* s = seq ? c_.log_put : c_.put;
  StmtReset reset(s);
  int rc = seq ? sqlite3_bind_int64(s, 1, *seq) : BindBlob(s, 1, key);
  if (rc == SQLITE_OK) rc = BindBlob(s, 2, value);
  if (rc != SQLITE_OK) return Fail(rc, "binding a key or value");
  rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) return Fail(rc, "writing a key");
  return Status::OK();
}

Status SqliteTxn::Delete(std::string_view key) {
  RETURN_IF_ERROR(CheckWritable());
  const auto seq = LogSeq(key);
  sqlite3_stmt* s = seq ? c_.log_del : c_.del;
  StmtReset reset(s);
  int rc = seq ? sqlite3_bind_int64(s, 1, *seq) : BindBlob(s, 1, key);
  if (rc != SQLITE_OK) return Fail(rc, "binding a key");
  rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) return Fail(rc, "deleting a key");
  return Status::OK();
}

Status SqliteTxn::ReadKv(const std::string& cursor, std::string_view end, size_t want,
                         std::vector<std::pair<std::string, std::string>>* rows) {
  sqlite3_stmt* s = end.empty() ? c_.scan_open : c_.scan_range;
  StmtReset reset(s);
  int rc = BindBlob(s, 1, cursor);
  int limit_index = 2;
  if (rc == SQLITE_OK && !end.empty()) {
    rc = BindBlob(s, 2, end);
    limit_index = 3;
  }
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, limit_index, static_cast<sqlite3_int64>(want));
  if (rc != SQLITE_OK) return Fail(rc, "binding scan bounds");
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) rows->emplace_back(ColumnBlob(s, 0), ColumnBlob(s, 1));
  if (rc != SQLITE_DONE) return Fail(rc, "scanning keys");
  return Status::OK();
}

Status SqliteTxn::ReadLog(const std::string& cursor, std::string_view end, size_t want,
                          std::vector<std::pair<std::string, std::string>>* rows) {
  const SeqRange r = LogSeqs(cursor, end);
  if (r.lo >= r.hi) return Status::OK();
  sqlite3_stmt* s = c_.log_scan;
  StmtReset reset(s);
  int rc = sqlite3_bind_int64(s, 1, r.lo);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 2, r.hi);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(want));
  if (rc != SQLITE_OK) return Fail(rc, "binding scan bounds");
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) rows->emplace_back(LogKey(sqlite3_column_int64(s, 0)), ColumnBlob(s, 1));
  if (rc != SQLITE_DONE) return Fail(rc, "scanning the change log");
  return Status::OK();
}

Status SqliteTxn::Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) {
  if (!error_.ok()) return error_;
  if (!end.empty() && begin >= end) return Status::OK();
  std::string cursor(begin);
  size_t visited = 0;
  std::vector<std::pair<std::string, std::string>> kv, log, rows;
  for (;;) {
    if (!error_.ok()) return error_;  // a Get/Put inside the callback failed
    size_t want = kScanBatch;
    if (limit != 0) want = std::min(want, limit - visited);
    // A batch of each table from the cursor, merged, the first `want` rows kept: a row
    // past the last of a table's full batch is never among them (all of that batch would
    // come before it), so nothing unread of either table sorts before the rows kept.
    kv.clear();
    log.clear();
    rows.clear();
    RETURN_IF_ERROR(ReadKv(cursor, end, want, &kv));
    RETURN_IF_ERROR(ReadLog(cursor, end, want, &log));
    size_t a = 0, b = 0;
    while (rows.size() < want && (a < kv.size() || b < log.size())) {
      rows.push_back(std::move((b == log.size() || (a < kv.size() && kv[a].first < log[b].first)) ? kv[a++] : log[b++]));
    }
    for (const auto& [k, v] : rows) {
      ++visited;
      if (!fn(k, v)) return Status::OK();
    }
    if (rows.size() < want) return Status::OK();  // both tables exhausted
    if (limit != 0 && visited >= limit) return Status::OK();
    // The smallest key after the last one seen.
    cursor = rows.back().first;
    cursor.push_back('\0');
  }
}

Status SqliteTxn::DeleteAll() {
  RETURN_IF_ERROR(CheckWritable());
  for (sqlite3_stmt* s : {c_.del_all, c_.log_del_all}) {
    int rc = StepOnce(s);
    if (rc != SQLITE_DONE) return Fail(rc, "deleting all keys");
  }
  return Status::OK();
}

Status SqliteTxn::CheckWritable() {
  if (!error_.ok()) return error_;
  if (read_only_) {
    // Sticky too: a read-only transaction that tried to write must not report success.
    error_ =
        Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)");
    return error_;
  }
  return Status::OK();
}

Status SqliteTxn::Fail(int rc, std::string_view what) {
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

}  // namespace tierfs::sqlite
