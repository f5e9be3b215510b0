#include "meta/postgres_txn.h"

#include <algorithm>
#include <cerrno>

#include "common/encoding.h"

namespace tierfs::pg {

namespace {

// Rows per Scan round trip: large enough to make round trips rare, small enough that a huge
// range never sits in memory at once.
constexpr size_t kScanBatch = 256;
// Queued writes are sent (and their replies read) once this many pile up, which bounds the
// memory of a transaction that writes a lot before its next read.
constexpr size_t kMaxQueued = 512;
// PostgreSQL stores at most 1 GB in one field.
constexpr size_t kMaxField = size_t{1} << 30;

std::string_view Cell(const PGresult* r, int row, int col) {
  return std::string_view(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}

std::string Int8(uint64_t v) {
  std::string s;
  PutU64(&s, v);
  return s;
}

}  // namespace

void Txn::Begin() {
  if (begun_) return;
  // REPEATABLE READ READ ONLY: a snapshot that never conflicts. SERIALIZABLE for writers,
  // so that what they scanned stays true until they commit (see postgres_engine.h).
  c_.QueueSql(read_only_ ? "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                         : "BEGIN ISOLATION LEVEL SERIALIZABLE");
  begun_ = true;
}

Status Txn::Fail(Status st) {
  if (error_.ok()) error_ = std::move(st);
  return error_;
}

Status Txn::RoundTrip() {
  Status st = c_.RoundTrip(&results_);
  if (!st.ok()) return Fail(std::move(st));
  return Status::OK();
}

Status Txn::CheckWritable() {
  if (!error_.ok()) return error_;
  if (read_only_) {
    return Fail(
        Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)"));
  }
  return Status::OK();
}

Status Txn::Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) {
  if (!error_.ok()) return error_;
  if (keys.size() + prefixes.size() > kMaxQueued) return Status::OK();  // a hint: too big to bother
  Begin();
  std::vector<size_t> at_key, at_prefix;
  std::string want = Int8(kScanBatch);
  for (const auto& k : keys) at_key.push_back(c_.Queue(Stmt::kGet, {k}));
  std::vector<std::string> ends;
  for (const auto& p : prefixes) ends.push_back(PrefixEnd(p));
  for (size_t i = 0; i < prefixes.size(); ++i) {
    at_prefix.push_back(ends[i].empty() ? c_.Queue(Stmt::kScanOpen, {prefixes[i], want})
                                        : c_.Queue(Stmt::kScanRange, {prefixes[i], ends[i], want}));
  }
  RETURN_IF_ERROR(RoundTrip());
  for (size_t i = 0; i < keys.size(); ++i) {
    const PGresult* r = results_[at_key[i]].get();
    got_[keys[i]] = PQntuples(r) == 0 ? std::optional<std::string>() : std::string(Cell(r, 0, 0));
  }
  for (size_t i = 0; i < prefixes.size(); ++i) scanned_[prefixes[i]] = std::move(results_[at_prefix[i]]);
  return Status::OK();
}

Result<std::optional<std::string>> Txn::Get(std::string_view key) {
  if (!error_.ok()) return error_;
  if (auto g = got_.find(key); g != got_.end()) return g->second;
  Begin();
  size_t i = c_.Queue(Stmt::kGet, {key});
  RETURN_IF_ERROR(RoundTrip());
  const PGresult* r = results_[i].get();
  if (PQntuples(r) == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(Cell(r, 0, 0)));
}

Result<std::vector<std::optional<std::string>>> Txn::GetMany(const std::vector<std::string>& keys) {
  if (!error_.ok()) return error_;
  std::vector<std::optional<std::string>> out(keys.size());
  if (!got_.empty() && std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return got_.count(k); })) {
    for (size_t i = 0; i < keys.size(); ++i) out[i] = got_.find(keys[i])->second;
    return out;
  }
  // kMaxQueued reads a round trip: the replies of one round trip are held at once.
  for (size_t at = 0; at < keys.size(); at += kMaxQueued) {
    const size_t n = std::min(kMaxQueued, keys.size() - at);
    Begin();
    std::vector<size_t> at_result(n);
    for (size_t j = 0; j < n; ++j) at_result[j] = c_.Queue(Stmt::kGet, {keys[at + j]});
    RETURN_IF_ERROR(RoundTrip());
    for (size_t j = 0; j < n; ++j) {
      const PGresult* r = results_[at_result[j]].get();
      if (PQntuples(r) > 0) out[at + j] = std::string(Cell(r, 0, 0));
    }
  }
  return out;
}

Status Txn::Put(std::string_view key, std::string_view value) {
  RETURN_IF_ERROR(CheckWritable());
  DropPrefetched();
  if (value.size() >= kMaxField || key.size() >= kMaxField) {
    return Fail(Status::Err(EFBIG, "a metadata value of " + std::to_string(value.size()) +
                                       " bytes exceeds PostgreSQL's limit of 1 GB per field"));
  }
  Begin();
  c_.Queue(Stmt::kPut, {key, value});
  wrote_ = true;
  if (c_.queued() >= kMaxQueued) return RoundTrip();
  return Status::OK();
}

Status Txn::Delete(std::string_view key) {
  RETURN_IF_ERROR(CheckWritable());
  DropPrefetched();
  Begin();
  c_.Queue(Stmt::kDelete, {key});
  wrote_ = true;
  if (c_.queued() >= kMaxQueued) return RoundTrip();
  return Status::OK();
}

Status Txn::Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) {
  if (!error_.ok()) return error_;
  if (!end.empty() && begin >= end) return Status::OK();
  // Keyset pagination: each batch starts at the smallest key after the last one seen, and
  // the callback may use the transaction between batches (its writes ahead of the cursor
  // are seen by later batches).
  std::string cursor(begin);
  size_t visited = 0;
  // A whole prefix that Prefetch read: its first batch of kScanBatch rows is here.
  ResultPtr prefetched;
  if (auto p = scanned_.find(begin); p != scanned_.end() && end == PrefixEnd(begin)) {
    prefetched = std::move(p->second);
    scanned_.erase(p);
  }
  for (;;) {
    size_t want = kScanBatch;
    // Owned here: a Get or Scan from the callback reuses results_.
    ResultPtr batch;
    if (prefetched) {
      batch = std::move(prefetched);
    } else {
      if (limit != 0) want = std::min(want, limit - visited);
      std::string want_param = Int8(want);
      Begin();
      size_t i = end.empty() ? c_.Queue(Stmt::kScanOpen, {cursor, want_param})
                             : c_.Queue(Stmt::kScanRange, {cursor, end, want_param});
      RETURN_IF_ERROR(RoundTrip());
      batch = std::move(results_[i]);
    }
    const int rows = PQntuples(batch.get());
    for (int row = 0; row < rows; ++row) {
      ++visited;
      if (!fn(Cell(batch.get(), row, 0), Cell(batch.get(), row, 1))) return error_;
      if (limit != 0 && visited >= limit) return error_;
    }
    if (!error_.ok()) return error_;
    if (static_cast<size_t>(rows) < want) return Status::OK();  // range exhausted
    if (limit != 0 && visited >= limit) return Status::OK();
    cursor.assign(Cell(batch.get(), rows - 1, 0));
    cursor.push_back('\0');
  }
}

}  // namespace tierfs::pg
