// One connection to a Redis server for the Redis metadata engine (redis_engine.h): connect
// with AUTH and SELECT, load the engine's scripts, and exchange pipelined commands.
#pragma once

#include <hiredis/hiredis.h>
#include <signal.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tierfs::redis {

// Where and how to connect. `where` names the server in messages ("redis://host:port/db",
// never with a password).
struct ConnParams {
  std::string host;
  int port = 6379;
  std::string user;
  std::string password;
  int db = 0;
  std::chrono::milliseconds connect_timeout{3000};
  // A reply that takes longer breaks the connection (and the transaction is retried).
  std::chrono::milliseconds io_timeout{10000};
  std::string where;
  // Sentinel mode (redis_sentinel.h): the handshake checks with ROLE that the server is a
  // master (EAGAIN if it is a replica), and a READONLY reply (the master was demoted under
  // the connection) breaks the connection and becomes EAGAIN, so the engine asks the
  // Sentinels again instead of failing.
  bool require_master = false;
};

// hiredis writes with write(2), which raises SIGPIPE on a connection the server closed
// (a restart) and would kill the process. Instead of changing the process's disposition
// behind the application's back, SIGPIPE is blocked on this thread while hiredis runs and
// a SIGPIPE that hiredis caused is consumed before unblocking; hiredis sees EPIPE.
class SigpipeGuard {
 public:
  SigpipeGuard();
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t set_;
  sigset_t old_;
  bool was_pending_ = false;
};

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// A command as binary-safe arguments. Arguments added with Arg are copied; ArgRef keeps a
// view, so the referenced bytes must outlive the exchange.
class Cmd {
 public:
  Cmd() = default;
  explicit Cmd(std::string_view name) { Arg(name); }
  // Moving keeps the views valid (a moved deque keeps its elements in place); a copy
  // would alias the source's storage.
  Cmd(Cmd&&) = default;
  Cmd& operator=(Cmd&&) = default;
  Cmd(const Cmd&) = delete;
  Cmd& operator=(const Cmd&) = delete;
  Cmd& Arg(std::string_view a);
  Cmd& Arg(std::string_view prefix, std::string_view a);  // prefix + a, one argument
  Cmd& Arg(long long n);
  Cmd& ArgRef(std::string_view a);
  const std::vector<std::string_view>& args() const { return args_; }

 private:
  std::deque<std::string> owned_;  // a deque never moves its elements, so views stay valid
  std::vector<std::string_view> args_;
};

// SHA1 names of the engine's Lua scripts as loaded on a connection (redis_scripts.h).
struct ScriptShas {
  std::string commit, scan_group, scan_multi, resolve, get_indirect, prefetch;
};

// Used by one thread at a time (the pool hands it out). Not thread-safe.
class Conn {
 public:
  // Connects, authenticates, selects the database and loads the scripts. Errors:
  //  - ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH...: the server is unreachable; the message
  //    names host:port and the reason.
  //  - EAGAIN: the server is busy (loading its data after a restart); retrying may help.
  //  - EACCES: authentication failed or is required; EINVAL: no such database.
  static Result<std::unique_ptr<Conn>> Open(const ConnParams& params);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Sends cmds in one write and reads one reply per command (error replies included).
  // Commands queued by the housekeeping calls below go first; their replies are dropped.
  // Fails with ECONNRESET on a broken connection, ETIMEDOUT on a timeout and EPROTO when
  // the peer does not speak Redis; the connection is then broken() and must not be reused.
  Status Exchange(const std::vector<Cmd>& cmds, std::vector<Reply>* replies);

  // Publish/subscribe (redis_watch.h): Send writes cmds without reading replies; Receive
  // returns the next reply or message, waiting at most `wait` for one (*out null: none
  // came). Errors as Exchange's.
  Status Send(const std::vector<Cmd>& cmds);
  Status Receive(std::chrono::milliseconds wait, Reply* out);

  bool broken() const { return broken_; }
  // In Sentinel mode turns an EROFS (READONLY) error into EAGAIN and breaks the
  // connection; otherwise returns why unchanged.
  Status FollowFailover(Status why);
  const ScriptShas& shas() const { return shas_; }
  // Loads the scripts again (after a NOSCRIPT reply: someone ran SCRIPT FLUSH).
  Status ReloadScripts();

  // Housekeeping carried by the next exchange instead of costing a round trip:
  // UNWATCH (watches left by a transaction that did not reach EXEC) and UNLINK of the
  // commit marker of the last transaction (redis_engine.h explains markers).
  void set_watching(bool w) { watching_ = w; }
  void ForgetMarkerLater(std::string marker) { stale_marker_ = std::move(marker); }

 private:
  Conn(redisContext* ctx, ConnParams params) : ctx_(ctx), params_(std::move(params)) {}
  Status Raw(const std::vector<Cmd>& cmds, std::vector<Reply>* replies);
  // Queues cmds in hiredis's output buffer.
  Status Append(const std::vector<Cmd>& cmds);
  Status IoError(const char* what);
  Status Handshake();

  redisContext* ctx_;
  const ConnParams params_;
  bool broken_ = false;
  bool watching_ = false;
  std::string stale_marker_;
  ScriptShas shas_;
};

// Helpers for replies.
bool IsError(const redisReply* r);
std::string_view Str(const redisReply* r);  // string, status or error text; "" otherwise
// Error replies meaning "the server cannot serve now, try again": LOADING, BUSY, TRYAGAIN,
// MASTERDOWN.
bool IsTransientError(const redisReply* r);
// Turns an unexpected error reply into a Status (OOM -> ENOSPC, NOAUTH -> EACCES,
// transient -> EAGAIN, else EIO), naming the server and what was being done.
Status ReplyStatus(const redisReply* r, const std::string& where, std::string_view what);

}  // namespace tierfs::redis
