#include "meta/redis_conn.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

#include "common/secret.h"
#include "meta/redis_scripts.h"

namespace tierfs::redis {

namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

SigpipeGuard::SigpipeGuard() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

SigpipeGuard::~SigpipeGuard() {
  if (!was_pending_) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{0, 0};
      int saved = errno;
      sigtimedwait(&set_, nullptr, &zero);
      errno = saved;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

Cmd& Cmd::Arg(std::string_view a) {
  owned_.emplace_back(a);
  args_.push_back(owned_.back());
  return *this;
}

Cmd& Cmd::Arg(std::string_view prefix, std::string_view a) {
  std::string& s = owned_.emplace_back();
  s.reserve(prefix.size() + a.size());
  s.append(prefix).append(a);
  args_.push_back(s);
  return *this;
}

Cmd& Cmd::Arg(long long n) { return Arg(std::to_string(n)); }

Cmd& Cmd::ArgRef(std::string_view a) {
  args_.push_back(a);
  return *this;
}

bool IsError(const redisReply* r) { return r != nullptr && r->type == REDIS_REPLY_ERROR; }

std::string_view Str(const redisReply* r) {
  if (r == nullptr) return {};
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
      r->type == REDIS_REPLY_ERROR) {
    return std::string_view(r->str, r->len);
  }
  return {};
}

bool IsTransientError(const redisReply* r) {
  if (!IsError(r)) return false;
  std::string_view s = Str(r);
  return StartsWith(s, "LOADING") || StartsWith(s, "BUSY") || StartsWith(s, "TRYAGAIN") ||
         StartsWith(s, "MASTERDOWN");
}

Status ReplyStatus(const redisReply* r, const std::string& where, std::string_view what) {
  std::string msg = "Redis at " + where + ": " + std::string(what) + " failed";
  if (r == nullptr) return Status::Err(EIO, msg + ": no reply");
  if (!IsError(r))
    return Status::Err(EIO, msg + ": unexpected reply type " + std::to_string(r->type));
  std::string_view s = Str(r);
  msg += ": server says \"" + std::string(s) + "\"";
  if (IsTransientError(r)) return Status::Err(EAGAIN, msg);
  if (StartsWith(s, "OOM")) {
    return Status::Err(ENOSPC,
                       msg + "; the server reached its maxmemory limit: raise it or free memory");
  }
  if (StartsWith(s, "NOAUTH") || StartsWith(s, "WRONGPASS") || StartsWith(s, "NOPERM")) {
    return Status::Err(EACCES, msg);
  }
  if (StartsWith(s, "READONLY")) {
    return Status::Err(EROFS,
                       msg + "; the META-URL points at a read-only replica: use the primary");
  }
  return Status::Err(EIO, msg);
}

Result<std::unique_ptr<Conn>> Conn::Open(const ConnParams& params) {
  std::string addr = params.host + ":" + std::to_string(params.port);
  errno = 0;
  redisContext* ctx = nullptr;
  {
    SigpipeGuard guard;
    ctx = redisConnectWithTimeout(params.host.c_str(), params.port,
                                  ToTimeval(params.connect_timeout));
  }
  if (ctx == nullptr) return Status::Err(ENOMEM, "out of memory connecting to Redis at " + addr);
  if (ctx->err != 0) {
    // hiredis set errno for socket failures; name resolution failures leave it 0.
    int code = errno != 0 ? errno : EHOSTUNREACH;
    std::string reason = ctx->errstr;
    redisFree(ctx);
    return Status::Err(code, "cannot connect to Redis at " + addr + " (" + params.where +
                                 "): " + reason +
                                 "; check that the server runs and the META-URL's host and port");
  }
  std::unique_ptr<Conn> conn(new Conn(ctx, params));
  if (redisSetTimeout(ctx, ToTimeval(params.io_timeout)) != REDIS_OK) {
    return conn->IoError("setting the socket timeout");
  }
  redisEnableKeepAlive(ctx);  // best effort: finds a vanished server on idle connections
  RETURN_IF_ERROR(conn->Handshake());
  return conn;
}

Conn::~Conn() { redisFree(ctx_); }

Status Conn::Handshake() {
  const std::string& where = params_.where;
  std::vector<Cmd> cmds;
  bool auth = !params_.password.empty();
  if (auth) {
    Cmd c("AUTH");
    if (!params_.user.empty()) c.Arg(params_.user);
    c.Arg(params_.password);
    cmds.push_back(std::move(c));
  }
  cmds.push_back(std::move(Cmd("SELECT").Arg(params_.db)));
  if (params_.require_master) cmds.emplace_back("ROLE");
  std::vector<Reply> replies;
  RETURN_IF_ERROR(Raw(cmds, &replies));
  size_t i = 0;
  if (auth) {
    const redisReply* r = replies[i++].get();
    if (IsError(r)) {
      if (IsTransientError(r)) return ReplyStatus(r, where, "authenticating");
      // The server's text never contains the password.
      return Status::Err(EACCES, "Redis at " + where + ": authentication failed (server says \"" +
                                     std::string(Str(r)) +
                                     "\"); check the user and password in the META-URL or $" +
                                     kMetaPasswordEnv);
    }
  }
  const redisReply* sel = replies[i].get();
  if (IsError(sel)) {
    std::string_view s = Str(sel);
    if (StartsWith(s, "NOAUTH")) {
      return Status::Err(EACCES, "Redis at " + where +
                                     " requires a password: give it in the META-URL "
                                     "(redis://[USER]:PASSWORD@HOST:PORT/DB), in $" +
                                     kMetaPasswordEnv + " or in a file named by $" +
                                     kMetaPasswordEnv + "_FILE");
    }
    if (s.find("out of range") != std::string_view::npos ||
        s.find("invalid DB") != std::string_view::npos) {
      return Status::Err(EINVAL, "Redis at " + where + " has no database " +
                                     std::to_string(params_.db) + " (server says \"" +
                                     std::string(s) +
                                     "\"); pick a number below its 'databases' setting");
    }
    return ReplyStatus(sel, where, "selecting the database");
  }
  if (params_.require_master) {
    const redisReply* role = replies[i + 1].get();
    std::string_view r = role->type == REDIS_REPLY_ARRAY && role->elements > 0 ? Str(role->element[0]) : "";
    if (r != "master") {
      broken_ = true;
      return Status::Err(EAGAIN, "Redis at " + where + " is not a master (ROLE says \"" +
                                     std::string(r.empty() ? Str(role) : r) +
                                     "\"): a failover is under way or a Sentinel's answer is stale");
    }
  }
  return ReloadScripts();
}

Status Conn::FollowFailover(Status why) {
  if (!params_.require_master || why.code() != EROFS) return why;
  broken_ = true;
  return Status::Err(EAGAIN, why.message() + " (the master was demoted: asking the Sentinels again)");
}

Status Conn::ReloadScripts() {
  std::vector<Cmd> cmds;
  for (const char* src :
       {kCommitScript, kScanGroupScript, kScanMultiScript, kResolveScript, kGetIndirectScript, kPrefetchScript}) {
    cmds.push_back(std::move(Cmd("SCRIPT").Arg("LOAD").ArgRef(src)));
  }
  std::vector<Reply> replies;
  RETURN_IF_ERROR(Raw(cmds, &replies));
  std::string* out[] = {&shas_.commit,  &shas_.scan_group,  &shas_.scan_multi,
                        &shas_.resolve, &shas_.get_indirect, &shas_.prefetch};
  for (size_t i = 0; i < replies.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (r->type != REDIS_REPLY_STRING) return ReplyStatus(r, params_.where, "loading a script");
    out[i]->assign(r->str, r->len);
  }
  return Status::OK();
}

Status Conn::Exchange(const std::vector<Cmd>& cmds, std::vector<Reply>* replies) {
  if (!watching_ && stale_marker_.empty()) return Raw(cmds, replies);
  std::vector<Cmd> all;
  all.reserve(cmds.size() + 2);
  size_t extra = 0;
  if (watching_) {
    all.emplace_back("UNWATCH");
    ++extra;
  }
  if (!stale_marker_.empty()) {
    all.push_back(std::move(Cmd("UNLINK").Arg(stale_marker_)));
    ++extra;
  }
  // Cmd holds views into its own storage; copying would alias the source, so append
  // views to the caller's commands, which live through this call.
  for (const Cmd& c : cmds) {
    Cmd copy;
    for (std::string_view a : c.args()) copy.ArgRef(a);
    all.push_back(std::move(copy));
  }
  watching_ = false;
  stale_marker_.clear();
  std::vector<Reply> got;
  RETURN_IF_ERROR(Raw(all, &got));
  replies->clear();
  for (size_t i = extra; i < got.size(); ++i) replies->push_back(std::move(got[i]));
  return Status::OK();
}

Status Conn::Raw(const std::vector<Cmd>& cmds, std::vector<Reply>* replies) {
  replies->clear();
  if (broken_)
    return Status::Err(ECONNRESET, "Redis at " + params_.where + ": connection is broken");
  SigpipeGuard guard;
  RETURN_IF_ERROR(Append(cmds));
  replies->reserve(cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return IoError("reading a reply");
    replies->emplace_back(static_cast<redisReply*>(raw));
  }
  return Status::OK();
}

Status Conn::Append(const std::vector<Cmd>& cmds) {
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  for (const Cmd& c : cmds) {
    argv.clear();
    argvlen.clear();
    for (std::string_view a : c.args()) {
      argv.push_back(a.data());
      argvlen.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), argvlen.data()) != REDIS_OK) {
      return IoError("queueing a command");
    }
  }
  return Status::OK();
}

Status Conn::Send(const std::vector<Cmd>& cmds) {
  if (broken_) return Status::Err(ECONNRESET, "Redis at " + params_.where + ": connection is broken");
  SigpipeGuard guard;
  RETURN_IF_ERROR(Append(cmds));
  int done = 0;
  while (!done) {
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return IoError("sending a command");
  }
  return Status::OK();
}

Status Conn::Receive(std::chrono::milliseconds wait, Reply* out) {
  out->reset();
  if (broken_) return Status::Err(ECONNRESET, "Redis at " + params_.where + ": connection is broken");
  void* raw = nullptr;
  if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) return IoError("reading a message");
  if (raw == nullptr) {
    pollfd p{ctx_->fd, POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(wait.count()));
    if (n < 0 && errno == EINTR) return Status::OK();
    if (n < 0) return IoError("waiting for a message");
    if (n == 0) return Status::OK();
    if (redisBufferRead(ctx_) != REDIS_OK) return IoError("reading a message");
    if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) return IoError("reading a message");
  }
  out->reset(static_cast<redisReply*>(raw));
  return Status::OK();
}

Status Conn::IoError(const char* what) {
  broken_ = true;
  int saved = errno;
  std::string reason = ctx_->errstr[0] != '\0' ? ctx_->errstr : "connection lost";
  int code = ECONNRESET;
  if (ctx_->err == REDIS_ERR_IO && (saved == EAGAIN || saved == EWOULDBLOCK)) {
    code = ETIMEDOUT;
    reason = "no reply within " + std::to_string(params_.io_timeout.count()) + " ms";
  } else if (ctx_->err == REDIS_ERR_EOF) {
    reason = "the server closed the connection";
  } else if (ctx_->err == REDIS_ERR_PROTOCOL) {
    code = EPROTO;
    reason += "; is " + params_.host + ":" + std::to_string(params_.port) + " a Redis server?";
  }
  return Status::Err(code, "Redis at " + params_.host + ":" + std::to_string(params_.port) + ": " +
                               what + " failed: " + reason);
}

}  // namespace tierfs::redis
