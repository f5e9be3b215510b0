// One libpq connection of the PostgreSQL engine, in non-blocking pipeline mode.
//
// Commands are queued (Queue/QueueSql) and sent together; RoundTrip sends whatever is queued
// and reads every reply, so a batch of writes followed by a read, or by COMMIT, costs one
// network round trip. Batches are separated by Sync messages (EndBatch): an error aborts the
// rest of its batch only (the transaction itself stays aborted until ROLLBACK). SendOnly
// sends without waiting; its replies are read and dropped at the start of the next
// RoundTrip, which lets a read-only transaction end without a round trip of its own.
//
// Every wait for the server is bounded by the timeout in Params: a server that does not
// answer in time is treated like a lost connection.
//
// Errors are Status values; two codes are reserved for the engine's retry decisions:
// kConflict (serialization failure or deadlock: run the transaction again) and kLost (the
// connection is gone and must be replaced; whether a COMMIT in flight took effect is not
// known). All other codes are final (EACCES, ENOENT, ENOSPC, EIO, ...).
//
// Used by one thread at a time.
#pragma once

#include <libpq-fe.h>

#include <cerrno>
#include <chrono>
#include <deque>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "meta/postgres_params.h"

namespace tierfs::pg {

inline constexpr int kConflict = EAGAIN;
inline constexpr int kLost = ENOTCONN;

// The table holding the whole key space (see postgres_engine.h).
inline constexpr char kTable[] = "tierfs_kv";
// One row per open connection: its commit marker (see postgres_engine.h).
inline constexpr char kCommitsTable[] = "tierfs_commits";

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// Statements prepared on every connection. Parameters and results are binary: keys and
// values travel as raw bytea, limits as big-endian int8.
enum class Stmt {
  kGet,        // $1 key -> v
  kPut,        // $1 key, $2 value
  kDelete,     // $1 key
  kScanRange,  // $1 begin, $2 end, $3 limit -> k, v in key order, k in [begin, end)
  kScanOpen,   // $1 begin, $2 limit -> k, v in key order, k >= begin
  kMark,       // $1 connection id (text), $2 sequence number: sets the commit marker
};

class Conn {
 public:
  // Connects (bounded by params.timeout) and switches to pipeline mode. With prepare, also
  // prepares the statements above and plants this connection's commit marker, which needs
  // both tables to exist. Connection failures get messages naming HOST:PORT; a wrong
  // password is EACCES, a missing database ENOENT, a server that is starting up or full,
  // or servers that are all standbys or read-only (a failover under way), EAGAIN, an
  // unreachable one ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH or EIO.
  // *marker_sent (when given) is set to the marker's id once its row may exist: a failure
  // after that leaves a row that the caller must have deleted.
  static Result<std::unique_ptr<Conn>> Open(const Params& params, bool prepare, std::string* marker_sent = nullptr);
  // A connection that still works removes its commit marker on the way out.
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Queues a prepared statement; the parameters are copied at once. Returns the index of
  // its result in the next RoundTrip's results.
  size_t Queue(Stmt stmt, std::initializer_list<std::string_view> params);
  // Queues a one-off statement with text parameters and text results.
  size_t QueueSql(const char* sql, std::initializer_list<std::string_view> params = {});
  // Closes the current batch with a Sync (an error aborts the rest of its batch only).
  void EndBatch();
  // Sends everything queued and reads every reply. (*results)[i] is the result of the i-th
  // command queued since the last RoundTrip or SendOnly, or null if it failed or was
  // skipped after an earlier failure; when the connection is lost midway, results holds
  // only what arrived. Returns the first failure.
  Status RoundTrip(std::vector<ResultPtr>* results);
  // Sends everything queued without waiting for the replies.
  Status SendOnly();

  // Prepares the statements above, makes the planner use the key index and plants the
  // commit marker (done by Open when asked to).
  Status Prepare(std::string* marker_sent = nullptr);

  bool prepared() const { return prepared_; }
  // This connection's id in tierfs_commits (32 hex digits), and the sequence number of its
  // marker as the last write transaction set it.
  const std::string& marker_id() const { return marker_id_; }
  // The server's end of this connection, as connected: HOST:PORT and the process id of the
  // backend serving it (what pg_stat_activity lists it under while it lives).
  const std::string& endpoint() const { return endpoint_; }
  int backend_pid() const { return backend_pid_; }
  // Queues the marker update of the next write transaction; returns its result index and
  // sets *seq to the number written.
  size_t QueueMark(uint64_t* seq);
  // Checks, without a round trip, that the server has not already closed the connection
  // (say, while the callback was running); false marks the connection broken.
  bool CheckAlive();

  // Commands queued and not yet sent.
  size_t queued() const { return queued_total_; }
  // The SQLSTATE of the first failed command of the last RoundTrip ("" if none).
  const std::string& last_sqlstate() const { return last_sqlstate_; }
  // True once the server itself reported that it ended the session (shutdown, crash
  // recovery, administrator): the server answers strictly in order, so every command whose
  // reply had not arrived before that report was never executed. Also true once a write
  // failed because the server is read-only (a primary demoted under us): the transaction
  // is then aborted and its COMMIT cannot take effect.
  bool ended_by_server() const { return ended_by_server_; }
  bool broken() const { return !lost_.ok(); }
  // Why the connection is broken (OK while it is not).
  const Status& lost() const { return lost_; }
  // Marks the connection unusable (it is closed instead of being pooled).
  void MarkBroken(const std::string& why);
  // Breaks the connection for the server too (shutdown of the socket), so that its backend
  // ends at its next read instead of waiting for this client until the connection closes.
  void Sever();

 private:
  Conn(const Params& params, PGconn* c) : params_(params), c_(c) {}

  Status Flush(std::chrono::steady_clock::time_point deadline);
  Status Wait(short events, std::chrono::steady_clock::time_point deadline, short* revents);
  // The next result, waiting for it; null at the end of a command's results.
  Status Next(ResultPtr* out, std::chrono::steady_clock::time_point deadline);
  // Reads the replies of one batch of n commands and its Sync.
  Status ReadBatch(size_t n, std::vector<ResultPtr>* results, Status* first,
                   std::chrono::steady_clock::time_point deadline);
  Status DrainUnread(std::chrono::steady_clock::time_point deadline);
  Status ErrorFromResult(const PGresult* r);
  Status Lost(const std::string& why);
  void CountQueued(int ok);

  const Params& params_;
  PGconn* c_;
  Status lost_;                  // set once the connection is unusable
  std::vector<size_t> batches_;  // commands per closed batch not yet sent
  size_t open_batch_ = 0;        // commands in the batch not yet closed
  size_t queued_total_ = 0;
  std::deque<size_t> unread_;  // commands per batch sent by SendOnly, replies unread
  std::string last_sqlstate_;
  bool ended_by_server_ = false;
  bool prepared_ = false;
  std::string marker_id_;
  std::string endpoint_;
  int backend_pid_ = 0;
  uint64_t marker_seq_ = 0;
};

}  // namespace tierfs::pg
