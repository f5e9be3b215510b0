#include "meta/redis_engine.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/backoff.h"
#include "meta/engine_retry.h"
#include "meta/redis_conn.h"
#include "meta/redis_options.h"
#include "meta/redis_txn.h"
#include "meta/txn_nesting.h"

namespace tierfs {

namespace {

using redis::Cmd;
using redis::Conn;
using redis::Finish;
using redis::Outcome;
using redis::Reply;
using Clock = std::chrono::steady_clock;

constexpr char kMarkerKey[] = "tierfs";
// Identifies the layout described in redis_engine.h; a different one is refused.
constexpr char kMarkerValue[] = "TierFS metadata, redis layout 1";
// Connections kept open while idle; beyond this, released connections are closed.
constexpr size_t kMaxIdle = 16;
// Conflicts retry quickly; an unreachable server is polled more gently.
constexpr std::chrono::microseconds kConflictBase(200), kConflictCap(50'000);
constexpr std::chrono::microseconds kServerBase(10'000), kServerCap(1'000'000);
// Commit markers outlive the deadline by this much, so a lost EXEC is always resolvable.
constexpr std::chrono::seconds kMarkerSlack(60);
constexpr std::chrono::seconds kRetryWarnAfter(2);

std::string NewMarker() {
  char buf[40];
  snprintf(buf, sizeof(buf), "x%016llx%016llx", static_cast<unsigned long long>(ThreadRng()()),
           static_cast<unsigned long long>(ThreadRng()()));
  return buf;
}

// Server states worth waiting for; everything else is reported at once.
bool Retryable(const Status& st) {
  switch (st.code()) {
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

class RedisEngine final : public KvEngine {
 public:
  explicit RedisEngine(redis::Options options) : o_(std::move(options)) {}

  // Connects once and checks (or marks) the database. Waits for a loading server, but
  // reports an unreachable one at once: at open that is nearly always a wrong URL.
  Status Init() {
    auto deadline = Clock::now() + o_.deadline;
    for (int attempt = 0;; ++attempt) {
      auto conn = Conn::Open(o_.conn);
      Status st = conn.ok() ? CheckVolume(**conn) : conn.status();
      if (st.ok()) {
        Release(std::move(*conn));
        return st;
      }
      if (st.code() != EAGAIN) return st;
      auto wait = JitteredBackoff(attempt, kServerBase, kServerCap);
      if (Clock::now() + wait > deadline) return Status::Err(EIO, st.message());
      std::this_thread::sleep_for(wait);
    }
  }

  std::string Describe() const override { return o_.describe; }

  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    if (TxnNesting::Inside(this)) {
      return Status::Err(
          EDEADLK, "nested transaction on metadata engine " + Describe() + " (programming error)");
    }
    TxnNesting::Mark mark(this);
    auto deadline = Clock::now() + o_.deadline;
    return WithRetry(read_only ? "a read transaction" : "a write transaction", deadline,
                     [&]() { return RunOnce(fn, read_only, deadline); });
  }

  Status Reset() override {
    if (TxnNesting::Inside(this)) {
      return Status::Err(EDEADLK, "Reset inside a transaction on metadata engine " + Describe() +
                                      " (programming error)");
    }
    auto deadline = Clock::now() + o_.deadline;
    return WithRetry("emptying the database", deadline, [&]() { return ResetOnce(); });
  }

 private:
  template <typename F>
  Status WithRetry(const char* what, Clock::time_point deadline, F&& attempt_fn) {
    static const RetryPolicy kPolicy{kConflictBase, kConflictCap, kServerBase, kServerCap, kRetryWarnAfter};
    return RetryAttempts(Describe(), what, deadline, std::forward<F>(attempt_fn), kPolicy);
  }

  Attempt RunOnce(const std::function<Status(KvTxn&)>& fn, bool read_only,
                  Clock::time_point deadline) {
    auto acquired = Acquire();
    if (!acquired.ok()) {
      if (Retryable(acquired.status())) return Attempt::Unavailable(acquired.status());
      return Attempt::Done(acquired.status());
    }
    std::unique_ptr<Conn> conn = std::move(*acquired);
    Attempt result;
    std::string marker;
    {
      redis::RedisTxn txn(*conn, o_.describe, read_only);
      Status st = fn(txn);
      result = Conclude(txn, st, &marker);
      if (txn.watching()) conn->set_watching(true);
    }
    if (result.kind == Attempt::kDone && result.status.ok() && !marker.empty()) {
      conn->ForgetMarkerLater(marker);
    }
    bool ambiguous = result.kind == Attempt::kUnavailable && !marker.empty();
    Release(std::move(conn));
    if (ambiguous) return Resolve(marker, result.status, deadline);
    return result;
  }

  // Ends an attempt after the callback returned st. Sets *marker when a commit was sent
  // and its outcome is unknown (returned as kUnavailable) or known good.
  Attempt Conclude(redis::RedisTxn& txn, const Status& st, std::string* marker) {
    if (!txn.unavailable().ok()) return Attempt::Unavailable(txn.unavailable());
    Status err = !st.ok() ? st : txn.error();
    bool commit = err.ok() && txn.has_writes();
    if (!commit) {
      if (txn.reads() <= 1) return Attempt::Done(err);
      Finish f = txn.Validate();
      switch (f.outcome) {
        case Outcome::kOk:
          return Attempt::Done(err);
        case Outcome::kConflict:
          return Attempt::Conflict();
        case Outcome::kFailed:
          return Attempt::Done(f.status);
        default:
          return Attempt::Unavailable(f.status);
      }
    }
    std::string m = NewMarker();
    long long ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(o_.deadline + kMarkerSlack).count();
    Finish f = txn.Commit(m, ttl);
    switch (f.outcome) {
      case Outcome::kOk:
        *marker = std::move(m);
        return Attempt::Done(Status::OK());
      case Outcome::kConflict:
        return Attempt::Conflict();
      case Outcome::kRetry:
        return Attempt::Unavailable(f.status);
      case Outcome::kAmbiguous:
        *marker = std::move(m);
        return Attempt::Unavailable(f.status);
      case Outcome::kFailed:
        break;
    }
    return Attempt::Done(f.status);
  }

  // Finds out whether the commit named by marker applied, making sure that if it has not,
  // it never will. Committed: done. Not committed: the attempt is rerun.
  Attempt Resolve(const std::string& marker, const Status& why, Clock::time_point deadline) {
    long long ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(o_.deadline + kMarkerSlack).count();
    Status last = why;
    for (int attempt = 0;; ++attempt) {
      auto conn = Acquire();
      if (conn.ok()) {
        std::vector<Cmd> cmds;
        cmds.push_back(
            std::move(Cmd("EVALSHA").Arg((*conn)->shas().resolve).Arg(0LL).Arg(marker).Arg(ttl)));
        std::vector<Reply> replies;
        Status st = (*conn)->Exchange(cmds, &replies);
        if (st.ok()) {
          const redisReply* r = replies[0].get();
          if (r->type == REDIS_REPLY_INTEGER) {
            Release(std::move(*conn));
            if (r->integer == 1) {
              spdlog::debug("metadata engine {}: a commit whose reply was lost had applied",
                            Describe());
              return Attempt::Done(Status::OK());
            }
            return Attempt::Unavailable(why);
          }
          st = redis::ReplyStatus(r, o_.describe, "resolving a commit whose reply was lost");
        }
        Release(std::move(*conn));
        last = st;
      } else {
        last = conn.status();
      }
      if (!Retryable(last) && last.code() != EIO) break;
      auto wait = JitteredBackoff(attempt, kServerBase, kServerCap);
      if (Clock::now() + wait > deadline) break;
      std::this_thread::sleep_for(wait);
    }
    return Attempt::Done(Status::Err(
        EIO,
        "metadata engine " + Describe() +
            ": the outcome of a commit is unknown (its reply was lost and the server could not be "
            "asked in time: " +
            last.message() + ")"));
  }

  Attempt ResetOnce() {
    auto acquired = Acquire();
    if (!acquired.ok()) {
      if (Retryable(acquired.status())) return Attempt::Unavailable(acquired.status());
      return Attempt::Done(acquired.status());
    }
    std::unique_ptr<Conn> conn = std::move(*acquired);
    bool watching = false;  // the WATCH outlives this attempt unless EXEC ran
    Attempt result = [&]() -> Attempt {
      std::vector<Cmd> cmds;
      cmds.push_back(std::move(Cmd("WATCH").Arg(kMarkerKey)));
      cmds.push_back(std::move(Cmd("GET").Arg(kMarkerKey)));
      std::vector<Reply> replies;
      Status st = conn->Exchange(cmds, &replies);
      if (!st.ok()) return Attempt::Unavailable(st);
      watching = true;
      const redisReply* marker = replies[1].get();
      if (marker->type != REDIS_REPLY_STRING || redis::Str(marker) != kMarkerValue) {
        return Attempt::Done(Status::Err(
            EINVAL, Describe() +
                        " is not a TierFS volume any more (its marker key is gone or changed); "
                        "refusing to empty it"));
      }
      cmds.clear();
      cmds.emplace_back("MULTI");
      cmds.push_back(std::move(Cmd("FLUSHDB").Arg("ASYNC")));
      cmds.push_back(std::move(Cmd("SET").Arg(kMarkerKey).Arg(kMarkerValue)));
      cmds.emplace_back("EXEC");
      st = conn->Exchange(cmds, &replies);
      // Emptying is idempotent, so a lost reply is simply retried.
      if (!st.ok()) return Attempt::Unavailable(st);
      watching = false;
      const redisReply* exec = replies.back().get();
      if (exec->type == REDIS_REPLY_NIL) return Attempt::Conflict();
      if (exec->type != REDIS_REPLY_ARRAY) {
        Status why = redis::ReplyStatus(exec, o_.describe, "emptying the database");
        return why.code() == EAGAIN ? Attempt::Unavailable(why) : Attempt::Done(why);
      }
      return Attempt::Done(Status::OK());
    }();
    if (watching) conn->set_watching(true);
    Release(std::move(conn));
    return result;
  }

  // Refuses a database that holds keys of something else; marks an empty one as ours.
  Status CheckVolume(Conn& conn) {
    std::vector<Cmd> cmds;
    cmds.push_back(std::move(Cmd("GET").Arg(kMarkerKey)));
    cmds.emplace_back("DBSIZE");
    std::vector<Reply> replies;
    RETURN_IF_ERROR(conn.Exchange(cmds, &replies));
    const redisReply* marker = replies[0].get();
    const redisReply* size = replies[1].get();
    if (redis::IsError(marker))
      return redis::ReplyStatus(marker, o_.describe, "reading the volume marker");
    if (marker->type == REDIS_REPLY_STRING) {
      if (redis::Str(marker) == kMarkerValue) return Status::OK();
      return Status::Err(EINVAL, o_.describe + " holds a TierFS volume of another layout (\"" +
                                     std::string(redis::Str(marker)) +
                                     "\"); use the TierFS version that created it");
    }
    if (size->type != REDIS_REPLY_INTEGER)
      return redis::ReplyStatus(size, o_.describe, "counting keys");
    if (size->integer != 0) {
      return Status::Err(EINVAL, o_.describe +
                                     " holds keys that are not a TierFS volume; refusing to use it "
                                     "(choose another database number or server)");
    }
    cmds.clear();
    cmds.push_back(std::move(Cmd("SET").Arg(kMarkerKey).Arg(kMarkerValue).Arg("NX")));
    RETURN_IF_ERROR(conn.Exchange(cmds, &replies));
    if (redis::IsError(replies[0].get())) {
      return redis::ReplyStatus(replies[0].get(), o_.describe,
                                "marking the database as a TierFS volume");
    }
    return Status::OK();
  }

  // Reads the server's persistence and replication settings. Redis replicates
  // asynchronously: a failover to a replica may lose what the master acknowledged and the
  // replica had not received, so no Redis set-up is safe by DurabilityReport's measure.
  Result<DurabilityReport> Durability() override {
    ASSIGN_OR_RETURN(auto conn, Acquire());
    std::vector<Cmd> cmds;
    for (const char* name : {"appendonly", "appendfsync", "min-replicas-to-write"}) {
      cmds.push_back(std::move(Cmd("CONFIG").Arg("GET").Arg(name)));
    }
    cmds.push_back(std::move(Cmd("INFO").Arg("replication")));
    std::vector<Reply> replies;
    Status st = conn->Exchange(cmds, &replies);
    Release(std::move(conn));
    RETURN_IF_ERROR(st);
    auto config = [&](size_t i) -> std::string {
      const redisReply* r = replies[i].get();
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING) {
        return std::string(redis::Str(r->element[1]));
      }
      return "";  // CONFIG renamed or refused
    };
    std::string aof = config(0), fsync = config(1), min_replicas = config(2);
    std::string info = replies[3]->type == REDIS_REPLY_STRING
                           ? std::string(redis::Str(replies[3].get()))
                           : "";
    auto field = [&](const std::string& name) {
      size_t at = info.find(name + ":");
      if (at == std::string::npos) return std::string();
      size_t end = info.find_first_of("\r\n", at);
      return info.substr(at + name.size() + 1, end == std::string::npos ? std::string::npos : end - at - name.size() - 1);
    };
    std::string replicas = field("connected_slaves");
    DurabilityReport d;
    d.summary = "Redis " + field("role") + ", appendonly " + (aof.empty() ? "?" : aof) + ", appendfsync " +
                (fsync.empty() ? "?" : fsync) + ", " + (replicas.empty() ? "?" : replicas) + " replica(s)";
    if (aof.empty()) d.risks.push_back("the server refuses CONFIG GET: its persistence settings are unknown");
    if (aof == "no") {
      d.risks.push_back("appendonly no: a restart of the server loses every write since its last snapshot");
    } else if (!fsync.empty() && fsync != "always") {
      d.risks.push_back("appendfsync " + fsync + ": a crash of the server's machine loses up to a second of "
                        "acknowledged writes (appendfsync always keeps them)");
    }
    if (replicas.empty() || replicas == "0") {
      d.risks.push_back("no replica: the server's disk is the only copy, and its loss loses the volume");
    } else {
      d.risks.push_back("replication is asynchronous" +
                        std::string(min_replicas.empty() || min_replicas == "0"
                                        ? ""
                                        : " (min-replicas-to-write " + min_replicas + " only refuses writes "
                                          "when replicas are missing)") +
                        ": a failover to a replica loses acknowledged writes it had not received");
    }
    d.safe = false;
    return d;
  }

  Result<std::unique_ptr<Conn>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Conn> c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return Conn::Open(o_.conn);
  }

  void Release(std::unique_ptr<Conn> conn) {
    std::vector<std::unique_ptr<Conn>> closing;  // closed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (conn->broken()) {
      // The others probably broke the same way (server restart): start afresh.
      closing.swap(idle_);
      return;
    }
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
  }

  const redis::Options o_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<KvEngine>> OpenRedisEngine(const Url& url) {
  ASSIGN_OR_RETURN(redis::Options options, redis::ParseOptions(url));
  auto engine = std::make_unique<RedisEngine>(std::move(options));
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<KvEngine>(std::move(engine));
}

}  // namespace tierfs
