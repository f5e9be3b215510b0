#include "meta/redis_engine.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "common/backoff.h"
#include "meta/engine_retry.h"
#include "meta/redis_conn.h"
#include "meta/redis_options.h"
#include "meta/redis_sentinel.h"
#include "meta/redis_txn.h"
#include "meta/redis_watch.h"
#include "meta/own_commits.h"
#include "meta/meta_retry_timeout.h"
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
// One WAIT blocks its connection at most this long; the engine repeats it until the deadline.
constexpr std::chrono::milliseconds kWaitSlice(1000);

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
  explicit RedisEngine(redis::Options options)
      : o_(std::move(options)), channel_(redis::ChangeChannel(o_.conn.db)) {}
  ~RedisEngine() override { (void)Watch(nullptr); }

  // Connects once and checks (or marks) the database. Waits for a loading server, but
  // reports an unreachable one at once: at open that is nearly always a wrong URL.
  Status Init() {
    auto deadline = Clock::now() + o_.deadline;
    for (int attempt = 0;; ++attempt) {
      auto conn = OpenConn();
      Status st = conn.ok() ? (*conn)->FollowFailover(CheckVolume(**conn)) : conn.status();
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

  // Commits are published by the commit script (redis_watch.h).
  Status Watch(WatchFn on_change) override {
    std::lock_guard<std::mutex> l(watch_mu_);
    if (!on_change) {
      watcher_.reset();  // joins the watch thread
      watching_ = false;
      return Status::OK();
    }
    if (watcher_) return Status::Err(EBUSY, "Redis " + Describe() + " is already watched");
    watching_ = true;  // before subscribing: every commit the watch may see is recorded
    auto w = redis::Watcher::Start([this] { return OpenConn(); }, channel_, o_.describe, &own_commits_,
                                   std::move(on_change));
    if (!w.ok()) {
      watching_ = false;
      return w.status();
    }
    watcher_ = std::move(*w);
    return Status::OK();
  }

  // How long one WAIT may block: a slice, never past the deadline, never 0 (which would
  // mean "forever" to Redis).
  long long WaitSlice(Clock::time_point deadline) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max<long long>(1, std::min(left, kWaitSlice).count());
  }

  // After a commit acknowledged by `have` replicas (WAIT's answer), repeats WAIT on the
  // same connection (WAIT counts the replicas that reached this connection's last write)
  // until wait_replicas hold it or the deadline passes. A connection lost while waiting is
  // reported as such (retryable): the caller asks again on a new one.
  Status WaitForReplicas(Conn& conn, long long have, Clock::time_point deadline) {
    while (have < o_.wait_replicas) {
      if (Clock::now() >= deadline) {
        return Status::Err(EIO, "metadata engine " + Describe() + ": a commit applied on the master but only " +
                                    std::to_string(have) + " of the " + std::to_string(o_.wait_replicas) +
                                    " replicas required by wait-replicas confirmed it before the timeout; it is "
                                    "kept only if a replica receives it before this master fails or is replaced "
                                    "(a master cut off from the others is)");
      }
      std::vector<Cmd> cmds;
      cmds.push_back(std::move(Cmd("WAIT").Arg(o_.wait_replicas).Arg(WaitSlice(deadline))));
      std::vector<Reply> replies;
      RETURN_IF_ERROR(conn.Exchange(cmds, &replies));
      const redisReply* r = replies[0].get();
      if (r->type != REDIS_REPLY_INTEGER) {
        return conn.FollowFailover(redis::ReplyStatus(r, o_.describe, "waiting for the replicas"));
      }
      have = r->integer;
    }
    return Status::OK();
  }

  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    if (TxnNesting::Inside(this)) {
      return Status::Err(
          EDEADLK, "nested transaction on metadata engine " + Describe() + " (programming error)");
    }
    TxnNesting::Mark mark(this);
    auto deadline = Clock::now() + TxnBudgetScope::Cap(o_.deadline);
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
      result = Conclude(txn, *conn, st, &marker, deadline);
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
  Attempt Conclude(redis::RedisTxn& txn, Conn& conn, const Status& st, std::string* marker,
                   Clock::time_point deadline) {
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
    if (watching_.load(std::memory_order_relaxed)) own_commits_.Add(m);
    long long ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(o_.deadline + kMarkerSlack).count();
    Finish f = txn.Commit(m, ttl, channel_, o_.wait_replicas, WaitSlice(deadline));
    switch (f.outcome) {
      case Outcome::kOk:
        *marker = std::move(m);
        if (o_.wait_replicas > 0) {
          Status st = WaitForReplicas(conn, f.replicas, deadline);
          // The connection broke while waiting: the commit applied, but whether the
          // replicas hold it is asked again on a new connection (Resolve).
          if (Retryable(st)) return Attempt::Unavailable(st);
          return Attempt::Done(st);
        }
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
        // A commit found must also be held by the replicas before it is acknowledged.
        if (o_.wait_replicas > 0) {
          cmds.push_back(std::move(Cmd("WAIT").Arg(o_.wait_replicas).Arg(WaitSlice(deadline))));
        }
        std::vector<Reply> replies;
        Status st = (*conn)->Exchange(cmds, &replies);
        if (st.ok()) {
          const redisReply* r = replies[0].get();
          if (r->type != REDIS_REPLY_INTEGER) {
            st = (*conn)->FollowFailover(
                redis::ReplyStatus(r, o_.describe, "resolving a commit whose reply was lost"));
          } else if (r->integer != 1) {
            Release(std::move(*conn));
            return Attempt::Unavailable(why);
          } else {
            spdlog::debug("metadata engine {}: a commit whose reply was lost had applied", Describe());
            if (o_.wait_replicas > 0) {
              const redisReply* w = replies[1].get();
              st = WaitForReplicas(**conn, w->type == REDIS_REPLY_INTEGER ? w->integer : 0, deadline);
            }
            // Lost while waiting for the replicas: asked again on a new connection.
            if (st.ok() || !Retryable(st)) {
              Release(std::move(*conn));
              return Attempt::Done(st);
            }
          }
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
  // replica had not received. A single server's failure loses no acknowledged commit only
  // when every commit waits for a replica (wait-replicas, under Sentinel, which promotes the
  // replica with the most data) and the master fsyncs each write (a master restarted with
  // less data than its replicas makes them resynchronise from it, dropping what they hold).
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
    int nreplicas = replicas.empty() ? 0 : atoi(replicas.c_str());
    bool sentinel = !o_.sentinels.empty();
    DurabilityReport d;
    d.summary = "Redis " + field("role") + (sentinel ? " under " + std::to_string(o_.sentinels.size()) + " Sentinel(s)" : "") +
                ", appendonly " + (aof.empty() ? "?" : aof) + ", appendfsync " + (fsync.empty() ? "?" : fsync) +
                ", " + (replicas.empty() ? "?" : replicas) + " replica(s), " +
                (o_.wait_replicas > 0 ? "each commit waits for " + std::to_string(o_.wait_replicas) + " replica(s)"
                                      : "commits do not wait for replicas");
    if (aof.empty()) d.risks.push_back("the server refuses CONFIG GET: its persistence settings are unknown");
    if (aof == "no") {
      d.risks.push_back("appendonly no: a restart of the server loses every write since its last snapshot");
    } else if (!fsync.empty() && fsync != "always") {
      d.risks.push_back("appendfsync " + fsync + ": a crash of the server's machine loses up to a second of "
                        "acknowledged writes (appendfsync always keeps them)");
    }
    if (nreplicas == 0) {
      d.risks.push_back("no replica: the server's disk is the only copy, and its loss loses the volume");
    } else if (o_.wait_replicas == 0) {
      d.risks.push_back("replication is asynchronous" +
                        std::string(min_replicas.empty() || min_replicas == "0"
                                        ? ""
                                        : " (min-replicas-to-write " + min_replicas + " only refuses writes "
                                          "when replicas are missing)") +
                        ": a failover to a replica loses acknowledged writes it had not received (add "
                        "?wait-replicas=1 to the META-URL)");
    } else if (nreplicas < o_.wait_replicas) {
      d.risks.push_back("wait-replicas " + std::to_string(o_.wait_replicas) + " but only " + replicas +
                        " replica(s) connected: commits fail with EIO after the timeout until enough return");
    }
    if (!sentinel) {
      d.risks.push_back("no Sentinel: nothing promotes a replica when the server fails (use a Sentinel URL, "
                        "redis://MASTER_NAME,SENTINEL1,SENTINEL2,SENTINEL3/DB)");
    }
    d.safe = d.risks.empty();
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
    return OpenConn();
  }

  // A new connection: to the URL's server, or in Sentinel mode to the master the
  // Sentinels name (asked again after any failure, since a failover may have moved it).
  Result<std::unique_ptr<Conn>> OpenConn() {
    if (o_.sentinels.empty()) return Conn::Open(o_.conn);
    redis::ConnParams p = o_.conn;
    std::optional<redis::MasterAddr> master;
    {
      std::lock_guard<std::mutex> lock(mu_);
      master = master_;
    }
    if (!master) {
      // Sentinels that cannot be asked are reported as they are (all down: ECONNREFUSED).
      ASSIGN_OR_RETURN(master, redis::AskSentinels(o_.master_name, o_.sentinels, o_.conn.connect_timeout));
    }
    p.host = master->host;
    p.port = master->port;
    p.require_master = true;
    p.where = o_.describe + " (master " + p.host + ":" + std::to_string(p.port) + ")";
    auto conn = Conn::Open(p);
    std::lock_guard<std::mutex> lock(mu_);
    if (conn.ok()) {
      master_ = master;
      return conn;
    }
    master_.reset();
    // The master the Sentinels named is down or demoted: a failover is probably under way,
    // so the caller waits for it (EAGAIN) instead of reporting a wrong URL.
    if (Retryable(conn.status()) || conn.status().code() == EAGAIN) {
      return Status::Err(EAGAIN, conn.status().message());
    }
    return conn.status();
  }

  void Release(std::unique_ptr<Conn> conn) {
    std::vector<std::unique_ptr<Conn>> closing;  // closed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (conn->broken()) {
      // The others probably broke the same way (server restart, failover): start afresh,
      // and in Sentinel mode ask where the master is.
      closing.swap(idle_);
      master_.reset();
      return;
    }
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
  }

  const redis::Options o_;
  const std::string channel_;  // where commits are published (redis_watch.h)
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by mu_
  std::optional<redis::MasterAddr> master_;  // Sentinel mode: the master last used; guarded by mu_
  OwnCommits own_commits_;                   // recorded only while watched
  std::atomic<bool> watching_{false};
  std::mutex watch_mu_;
  std::unique_ptr<redis::Watcher> watcher_;  // guarded by watch_mu_; declared last: stopped first
};

}  // namespace

Result<std::unique_ptr<KvEngine>> OpenRedisEngine(const Url& url) {
  ASSIGN_OR_RETURN(redis::Options options, redis::ParseOptions(url));
  auto engine = std::make_unique<RedisEngine>(std::move(options));
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<KvEngine>(std::move(engine));
}

}  // namespace tierfs
