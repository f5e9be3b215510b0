#include "meta/postgres_conn.h"

#include <poll.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <random>

#include "common/backoff.h"
#include "common/encoding.h"

namespace tierfs::pg {

namespace {

using Clock = std::chrono::steady_clock;

constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

struct StmtDef {
  Stmt stmt;
  const char* name;
  const char* sql;
  int nparams;
  Oid types[3];
};

// Keys compare as bytea, i.e. memcmp then length: the unsigned byte-string order of the
// KvEngine contract, whatever the database's collation.
const StmtDef kStmts[] = {
    {Stmt::kGet, "tierfs_get", "SELECT v FROM tierfs_kv WHERE k = $1", 1, {kByteaOid}},
    {Stmt::kPut,
     "tierfs_put",
     "INSERT INTO tierfs_kv(k, v) VALUES($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
     2,
     {kByteaOid, kByteaOid}},
    {Stmt::kDelete, "tierfs_del", "DELETE FROM tierfs_kv WHERE k = $1", 1, {kByteaOid}},
    {Stmt::kScanRange,
     "tierfs_scan_range",
     "SELECT k, v FROM tierfs_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3",
     3,
     {kByteaOid, kByteaOid, kInt8Oid}},
    {Stmt::kScanOpen,
     "tierfs_scan_open",
     "SELECT k, v FROM tierfs_kv WHERE k >= $1 ORDER BY k LIMIT $2",
     2,
     {kByteaOid, kInt8Oid}},
    {Stmt::kMark,
     "tierfs_mark",
     "INSERT INTO tierfs_commits(id, seq) VALUES($1, $2) ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq",
     2,
     {kTextOid, kInt8Oid}},
};

const StmtDef& Def(Stmt s) { return kStmts[static_cast<int>(s)]; }

// Server notices (e.g. "there is no transaction in progress" after a defensive ROLLBACK)
// are expected and must not reach stderr, which may be a mounted file system's terminal.
void QuietNotices(void*, const char* message) { spdlog::debug("postgres notice: {}", message); }

bool IsSqlStateChar(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c));
}

// With verbose errors libpq writes "FATAL:  28P01: message"; connection failures have no
// other way of exposing the SQLSTATE, and the code, unlike the text, is not translated.
std::string SqlStateIn(const std::string& text) {
  for (size_t i = 0; i + 8 <= text.size(); ++i) {
    if (text[i] != ' ' || text[i + 1] != ' ') continue;
    bool code = true;
    for (size_t j = i + 2; j < i + 7; ++j) code = code && IsSqlStateChar(text[j]);
    if (code && text[i + 7] == ':' && (i + 8 == text.size() || text[i + 8] == ' ')) {
      return text.substr(i + 2, 5);
    }
  }
  return "";
}

// One line from libpq's multi-line text: drops LOCATION lines and the SQLSTATE prefix.
std::string CleanMessage(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.erase(0, 1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty() || line.rfind("LOCATION:", 0) == 0) continue;
    std::string code = SqlStateIn(line);
    if (!code.empty()) {
      size_t at = line.find("  " + code + ": ");
      if (at != std::string::npos) line.erase(at + 1, code.size() + 3);
    }
    if (!out.empty()) out += "; ";
    out += line;
  }
  return out;
}

bool Contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

bool IsConnectionState(const std::string& code) {
  return code.rfind("08", 0) == 0 || code == "57P01" || code == "57P02" || code == "57P03";
}

// libpq's words when no server of the list took a read-write session (target_session_attrs)
// or a server is starting up, shutting down or recovering: what a failover looks like from
// outside, for a few seconds.
bool NoWritableServerYet(const std::string& raw) {
  for (const char* text : {"server is in hot standby mode", "session is read-only", "  57P03:",
                           "the database system is starting up", "the database system is in recovery mode",
                           "the database system is shutting down", "the database system is not yet accepting"}) {
    if (Contains(raw, text)) return true;
  }
  return false;
}

std::string RandomHex(size_t bytes) {
  std::mt19937_64& rng = ThreadRng();  // seeded again after fork(): markers stay unique
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned b = static_cast<unsigned>(rng() & 0xff);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

Result<std::unique_ptr<Conn>> Conn::Open(const Params& p, bool prepare, std::string* marker_sent) {
  std::vector<const char*> keys, values;
  for (size_t i = 0; i < p.keywords.size(); ++i) {
    keys.push_back(p.keywords[i].c_str());
    values.push_back(p.values[i].c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  const std::string server = "metadata server " + p.where;
  PGconn* c = PQconnectStartParams(keys.data(), values.data(), 0);
  if (c == nullptr) return Status::Err(ENOMEM, "out of memory connecting to " + server);
  std::unique_ptr<Conn> conn(new Conn(p, c));
  PQsetNoticeProcessor(c, QuietNotices, nullptr);
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  if (PQstatus(c) == CONNECTION_BAD) {
    // Failed before any network traffic: a bad option in the URL, or a host name that
    // does not resolve (handled below).
    std::string why = CleanMessage(PQerrorMessage(c));
    if (why.rfind("invalid", 0) == 0 || Contains(why, "invalid connection option")) {
      return Status::Err(
          EINVAL, "bad connection parameters for " + server + " in '" + p.redacted + "': " + why);
    }
    st = PGRES_POLLING_FAILED;
  }
  PQsetErrorVerbosity(c, PQERRORS_VERBOSE);

  const auto deadline = Clock::now() + p.timeout;
  bool timed_out = false;
  while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{PQsocket(c), static_cast<short>(st == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    int n = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n > 0) st = PQconnectPoll(c);
  }

  if (!timed_out && PQstatus(c) == CONNECTION_OK) {
    PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
    if (PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) {
      return Status::Err(EIO, "cannot set up the connection to " + server + ": " +
                                  CleanMessage(PQerrorMessage(c)));
    }
    const char* host = PQhost(c);
    const char* port = PQport(c);
    conn->endpoint_ = std::string(host != nullptr ? host : "") + ":" + (port != nullptr ? port : "");
    conn->backend_pid_ = PQbackendPID(c);
    if (prepare) RETURN_IF_ERROR(conn->Prepare(marker_sent));
    return conn;
  }

  std::string raw = PQerrorMessage(c);
  std::string why = CleanMessage(raw);
  std::string code = SqlStateIn(raw);
  const std::string user = p.user.empty() ? std::string("(default user)") : p.user;
  if (timed_out) {
    return Status::Err(ETIMEDOUT, "cannot connect to " + server + ": no answer within " +
                                      Seconds(p.timeout) +
                                      "; check that the server is running and reachable");
  }
  if (code == "28P01" || code == "28000" || Contains(raw, "authentication failed")) {
    return Status::Err(EACCES, "authentication failed for user " + user + " on " + server + " (" +
                                   why +
                                   "): check the password in the META-URL or in "
                                   "$TIERFS_META_PASSWORD or the file named by "
                                   "$TIERFS_META_PASSWORD_FILE");
  }
  if (PQconnectionNeedsPassword(c)) {
    return Status::Err(EACCES, "authentication failed: " + server + " wants a password for user " +
                                   user +
                                   " and none was given: put it in the META-URL or in "
                                   "$TIERFS_META_PASSWORD or the file named by "
                                   "$TIERFS_META_PASSWORD_FILE");
  }
  if (code == "3D000") {
    return Status::Err(ENOENT, "database " + p.database + " does not exist on " + server +
                                   ": create it (CREATE DATABASE " + p.database +
                                   ") or fix the META-URL");
  }
  if (code == "57P03" || code == "53300" || code == "53400" || NoWritableServerYet(raw)) {
    return Status::Err(EAGAIN, "cannot connect to " + server + ": " + why);
  }
  if (Contains(raw, "server closed the connection unexpectedly")) {
    // Took the connection, then dropped it before the session began: a server restarting
    // (a replica rejoining after pg_rewind, Patroni restarting it). libpq does not go on to
    // the URL's next host then, so this is waited out like "starting up", within ?timeout=.
    return Status::Err(EAGAIN, "cannot connect to " + server + " (database " + p.database +
                                   "): it closed the connection while it was being set up (restarting?): " +
                                   why);
  }
  if (code == "42501" || code.rfind("28", 0) == 0) {
    return Status::Err(EACCES, "cannot connect to " + server + ": " + why);
  }
  int err = EIO;
  if (Contains(raw, "Connection refused")) {
    err = ECONNREFUSED;
  } else if (Contains(raw, "timed out") || Contains(raw, "timeout expired")) {
    err = ETIMEDOUT;
  } else if (Contains(raw, "could not translate host name") || Contains(raw, "No route to host")) {
    err = EHOSTUNREACH;
  } else if (Contains(raw, "Network is unreachable")) {
    err = ENETUNREACH;
  }
  return Status::Err(err, "cannot connect to " + server + " (database " + p.database + "): " + why);
}

Conn::~Conn() {
  // The server runs the DELETE before it reads the Terminate that PQfinish sends; if the
  // socket cannot take it right away the row stays (ResolveCommit's and the engine's
  // cleanup cover what is left).
  if (prepared_ && lost_.ok()) {
    // Not waiting for a standby: nothing depends on the row's removal.
    const char* id = marker_id_.c_str();
    if (PQsendQueryParams(c_, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1 &&
        PQsendQueryParams(c_, "SET LOCAL synchronous_commit = local", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1 &&
        PQsendQueryParams(c_, "DELETE FROM tierfs_commits WHERE id = $1", 1, nullptr, &id, nullptr, nullptr, 0) == 1 &&
        PQsendQueryParams(c_, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1 && PQpipelineSync(c_) == 1) {
      (void)PQflush(c_);
    }
  }
  PQfinish(c_);
}

size_t Conn::QueueMark(uint64_t* seq) {
  *seq = ++marker_seq_;
  std::string be;
  PutU64(&be, *seq);
  return Queue(Stmt::kMark, {marker_id_, be});
}

Status Conn::Prepare(std::string* marker_sent) {
  // Every statement is a key lookup or a key-range scan, for which the primary key index is
  // the right plan at any table size. Left to itself the planner picks a sequential scan
  // on a small table, and under SERIALIZABLE a sequential scan locks the whole table
  // against concurrent writers, turning every concurrent write into a conflict.
  for (const char* sql : {"SET enable_seqscan = off", "SET enable_bitmapscan = off"}) {
    CountQueued(PQsendQueryParams(c_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0));
  }
  for (const StmtDef& d : kStmts) {
    CountQueued(PQsendPrepare(c_, d.name, d.sql, d.nparams, d.types));
  }
  // The marker row exists from the start, so that a write transaction's marker update
  // locks it and ResolveCommit can tell a transaction still running from one that ended.
  // Being a write, it also finds out at once that the server is a standby.
  // Its commit does not wait for a synchronous standby (it would hold up even a read-only
  // client while the standby is away): the row matters only on this server, to a resolver
  // asking while a transaction of ours still runs here; a server that takes over without
  // it lacks every later commit of this connection too, which is the answer it gives then.
  EndBatch();
  marker_id_ = RandomHex(16);
  marker_seq_ = 0;
  QueueSql("BEGIN");
  QueueSql("SET LOCAL synchronous_commit = local");
  Queue(Stmt::kMark, {marker_id_, std::string(8, '\0')});
  QueueSql("COMMIT");
  if (marker_sent) *marker_sent = marker_id_;
  std::vector<ResultPtr> results;
  Status st = RoundTrip(&results);
  if (!st.ok()) return st.With("preparing statements");
  prepared_ = true;
  return st;
}

void Conn::CountQueued(int ok) {
  if (ok != 1) {
    if (lost_.ok()) MarkBroken("cannot queue a statement: " + CleanMessage(PQerrorMessage(c_)));
    return;
  }
  ++open_batch_;
  ++queued_total_;
}

size_t Conn::Queue(Stmt stmt, std::initializer_list<std::string_view> params) {
  const StmtDef& d = Def(stmt);
  const char* values[3];
  int lengths[3];
  const int formats[3] = {1, 1, 1};
  size_t n = 0;
  for (std::string_view v : params) {
    if (n == 3) break;
    // A null pointer would mean SQL NULL; an empty key or value is a zero-length bytea.
    values[n] = v.data() != nullptr ? v.data() : "";
    lengths[n] = static_cast<int>(v.size());
    ++n;
  }
  size_t index = queued_total_;
  if (lost_.ok()) {
    CountQueued(PQsendQueryPrepared(c_, d.name, static_cast<int>(n), values, lengths, formats, 1));
  }
  return index;
}

size_t Conn::QueueSql(const char* sql, std::initializer_list<std::string_view> params) {
  std::vector<std::string> owned(params.begin(), params.end());
  std::vector<const char*> values;
  for (const auto& s : owned) values.push_back(s.c_str());
  size_t index = queued_total_;
  if (lost_.ok()) {
    CountQueued(PQsendQueryParams(c_, sql, static_cast<int>(values.size()), nullptr,
                                  values.empty() ? nullptr : values.data(), nullptr, nullptr, 0));
  }
  return index;
}

void Conn::EndBatch() {
  if (open_batch_ == 0 || !lost_.ok()) return;
  if (PQpipelineSync(c_) != 1) {
    MarkBroken("cannot queue a sync: " + CleanMessage(PQerrorMessage(c_)));
    return;
  }
  batches_.push_back(open_batch_);
  open_batch_ = 0;
}

void Conn::MarkBroken(const std::string& why) {
  if (lost_.ok()) {
    lost_ =
        Status::Err(kLost, "lost the connection to metadata server " + params_.where + ": " + why);
  }
}

void Conn::Sever() {
  MarkBroken("closed by this client");
  if (PQsocket(c_) >= 0) shutdown(PQsocket(c_), SHUT_RDWR);
}

Status Conn::Lost(const std::string& why) {
  MarkBroken(why);
  return lost_;
}

bool Conn::CheckAlive() {
  if (!lost_.ok()) return false;
  if (PQsocket(c_) < 0 || PQstatus(c_) == CONNECTION_BAD) {
    MarkBroken(CleanMessage(PQerrorMessage(c_)));
    return false;
  }
  pollfd pfd{PQsocket(c_), POLLIN, 0};
  if (poll(&pfd, 1, 0) > 0 && (PQconsumeInput(c_) != 1 || PQstatus(c_) == CONNECTION_BAD)) {
    MarkBroken(CleanMessage(PQerrorMessage(c_)));
    return false;
  }
  return true;
}

Status Conn::Wait(short events, Clock::time_point deadline, short* revents) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Lost("no reply within " + Seconds(params_.io_timeout) +
                  " (?io-timeout= in the META-URL sets how long one exchange may wait)");
    }
    int fd = PQsocket(c_);
    if (fd < 0) return Lost(CleanMessage(PQerrorMessage(c_)));
    pollfd pfd{fd, events, 0};
    int n = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Lost(std::string("poll failed: ") + std::strerror(errno));
    }
    if (n > 0) {
      *revents = pfd.revents;
      return Status::OK();
    }
  }
}

Status Conn::Flush(Clock::time_point deadline) {
  for (;;) {
    int rc = PQflush(c_);
    if (rc == 0) return Status::OK();
    if (rc < 0) return Lost(CleanMessage(PQerrorMessage(c_)));
    short revents = 0;
    RETURN_IF_ERROR(Wait(POLLIN | POLLOUT, deadline, &revents));
    // Reading while we cannot write keeps a server that is blocked on sending its replies
    // from deadlocking against us.
    if ((revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(c_) != 1) {
      return Lost(CleanMessage(PQerrorMessage(c_)));
    }
  }
}

Status Conn::Next(ResultPtr* out, Clock::time_point deadline) {
  while (PQisBusy(c_)) {
    short revents = 0;
    RETURN_IF_ERROR(Wait(POLLIN, deadline, &revents));
    if (PQconsumeInput(c_) != 1) return Lost(CleanMessage(PQerrorMessage(c_)));
  }
  out->reset(PQgetResult(c_));
  return Status::OK();
}

Status Conn::ErrorFromResult(const PGresult* r) {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  std::string code = state != nullptr ? state : "";
  std::string msg = primary != nullptr ? primary : CleanMessage(PQresultErrorMessage(r));
  if (last_sqlstate_.empty()) last_sqlstate_ = code;
  // Errors that libpq makes up itself (the socket closed, ...) have no SQLSTATE.
  if (IsConnectionState(code)) ended_by_server_ = true;
  if (PQstatus(c_) == CONNECTION_BAD || code.empty() || IsConnectionState(code)) {
    return Lost(msg);
  }
  const std::string where = "metadata server " + params_.where + " (database " + params_.database +
                            "): " + msg + " [SQLSTATE " + code + "]";
  if (code == "40001" || code == "40P01") return Status::Err(kConflict, where);
  if (code == "53100")
    return Status::Err(ENOSPC, where + "; the database server is out of disk space");
  if (code == "53200") return Status::Err(ENOMEM, where);
  if (code == "54000" || code == "54001") {
    return Status::Err(EFBIG, where + "; a metadata key or value is too large for PostgreSQL");
  }
  if (code == "42501") {
    return Status::Err(EACCES, where + "; grant user " + params_.user +
                                   " SELECT, INSERT, UPDATE, DELETE and TRUNCATE on table " + kTable +
                                   " and SELECT, INSERT, UPDATE, DELETE on table " + kCommitsTable);
  }
  if (code == "42P01") {
    return Status::Err(EIO, where + "; the metadata table " + std::string(kTable) + " or " + kCommitsTable +
                                " is missing: was the database reset? format the volume again");
  }
  if (code == "25006") {
    // Connected to a primary that has since been demoted, or to a standby (a URL naming it
    // with target_session_attrs other than read-write): another server may take writes
    // now, so the connection is dropped and the transaction, which cannot commit, is run
    // again on a new one.
    ended_by_server_ = true;
    return Lost(msg + " (the server is read-only: a standby, or a primary demoted by a failover)");
  }
  if (code == "55P03") return Status::Err(EBUSY, where);
  if (code == "57014") return Status::Err(ETIMEDOUT, where);
  return Status::Err(EIO, where);
}

Status Conn::ReadBatch(size_t n, std::vector<ResultPtr>* results, Status* first,
                       Clock::time_point deadline) {
  for (size_t i = 0; i < n; ++i) {
    ResultPtr r;
    RETURN_IF_ERROR(Next(&r, deadline));
    if (!r)
      return Lost(PQstatus(c_) == CONNECTION_BAD ? CleanMessage(PQerrorMessage(c_))
                                                 : "reply out of step with the commands sent");
    ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_FATAL_ERROR) {
      Status err = ErrorFromResult(r.get());
      if (first->ok()) *first = err;
      if (!lost_.ok()) return lost_;
      r.reset();
    } else if (st == PGRES_PIPELINE_ABORTED) {
      r.reset();  // skipped after an earlier error in the batch
    } else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return Lost(std::string("unexpected reply ") + PQresStatus(st));
    }
    if (results != nullptr) results->push_back(std::move(r));
    // Each command's results end with a null.
    ResultPtr end;
    RETURN_IF_ERROR(Next(&end, deadline));
    if (end) return Lost("reply out of step with the commands sent");
  }
  ResultPtr sync;
  RETURN_IF_ERROR(Next(&sync, deadline));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    if (sync && PQresultStatus(sync.get()) == PGRES_FATAL_ERROR) {
      Status err = ErrorFromResult(sync.get());
      return lost_.ok() ? Lost(err.message()) : lost_;
    }
    return Lost(PQstatus(c_) == CONNECTION_BAD ? CleanMessage(PQerrorMessage(c_))
                                               : "reply out of step with the commands sent");
  }
  return Status::OK();
}

Status Conn::DrainUnread(Clock::time_point deadline) {
  while (!unread_.empty()) {
    Status ignored;  // replies to COMMIT/ROLLBACK whose outcome no longer matters
    RETURN_IF_ERROR(ReadBatch(unread_.front(), nullptr, &ignored, deadline));
    unread_.pop_front();
  }
  return Status::OK();
}

Status Conn::RoundTrip(std::vector<ResultPtr>* results) {
  results->clear();
  last_sqlstate_.clear();
  if (!lost_.ok()) return lost_;
  EndBatch();
  if (!lost_.ok()) return lost_;
  const auto deadline = Clock::now() + params_.io_timeout;
  std::vector<size_t> batches;
  batches.swap(batches_);
  queued_total_ = 0;
  if (batches.empty()) return Status::OK();
  RETURN_IF_ERROR(Flush(deadline));
  RETURN_IF_ERROR(DrainUnread(deadline));
  Status first;
  for (size_t n : batches) RETURN_IF_ERROR(ReadBatch(n, results, &first, deadline));
  return first;
}

Status Conn::SendOnly() {
  if (!lost_.ok()) return lost_;
  EndBatch();
  if (!lost_.ok()) return lost_;
  for (size_t n : batches_) unread_.push_back(n);
  batches_.clear();
  queued_total_ = 0;
  return Flush(Clock::now() + params_.io_timeout);
}

}  // namespace tierfs::pg
