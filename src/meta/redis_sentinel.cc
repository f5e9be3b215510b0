#include "meta/redis_sentinel.h"

#include <hiredis/hiredis.h>

#include <cerrno>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "meta/redis_conn.h"

namespace tierfs::redis {

namespace {

struct Ask {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<MasterAddr> answer;  // the first one
  size_t pending = 0;
  int refused = 0, unknown = 0;
  int first_code = 0;
  std::string errors;  // "host:port: why; ..."
};

timeval ToTimeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

// One Sentinel: returns the address it names, or records why not.
void AskOne(std::shared_ptr<Ask> ask, std::string name, std::string host, int port, std::chrono::milliseconds timeout) {
  std::string who = host + ":" + std::to_string(port);
  std::optional<MasterAddr> got;
  std::string why;
  int code = 0;
  bool unknown = false;
  {
    SigpipeGuard guard;
    errno = 0;
    redisContext* ctx = redisConnectWithTimeout(host.c_str(), port, ToTimeval(timeout));
    if (ctx == nullptr || ctx->err != 0) {
      code = errno != 0 ? errno : EHOSTUNREACH;
      why = ctx != nullptr ? ctx->errstr : "out of memory";
    } else {
      redisSetTimeout(ctx, ToTimeval(timeout));
      auto* r = static_cast<redisReply*>(redisCommand(ctx, "SENTINEL get-master-addr-by-name %s", name.c_str()));
      if (r == nullptr) {
        code = ETIMEDOUT;
        why = ctx->errstr[0] ? ctx->errstr : "no reply";
      } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
                 r->element[1]->type == REDIS_REPLY_STRING) {
        got = MasterAddr{std::string(r->element[0]->str, r->element[0]->len), atoi(r->element[1]->str)};
      } else if (r->type == REDIS_REPLY_NIL) {
        unknown = true;
        code = EINVAL;
        why = "monitors no master named '" + name + "'";
      } else if (r->type == REDIS_REPLY_ERROR) {
        std::string s(r->str, r->len);
        code = s.rfind("NOAUTH", 0) == 0 ? EACCES : EPROTO;
        why = "says \"" + s + "\"" + (code == EACCES ? " (Sentinels with a password are not supported yet)" : "");
      } else {
        code = EPROTO;
        why = "gave an unexpected answer; is it a Redis Sentinel?";
      }
      if (r != nullptr) freeReplyObject(r);
    }
    if (ctx != nullptr) redisFree(ctx);
  }
  std::lock_guard<std::mutex> lock(ask->mu);
  --ask->pending;
  if (got) {
    if (!ask->answer) ask->answer = std::move(got);
  } else {
    if (code == ECONNREFUSED) ++ask->refused;
    if (unknown) ++ask->unknown;
    if (ask->first_code == 0) ask->first_code = code;
    ask->errors += (ask->errors.empty() ? "" : "; ") + who + ": " + why;
  }
  ask->cv.notify_all();
}

}  // namespace

Result<MasterAddr> AskSentinels(const std::string& master_name,
                                const std::vector<std::pair<std::string, int>>& sentinels,
                                std::chrono::milliseconds timeout) {
  auto ask = std::make_shared<Ask>();
  ask->pending = sentinels.size();
  for (const auto& [host, port] : sentinels) {
    std::thread(AskOne, ask, master_name, host, port, timeout).detach();
  }
  std::unique_lock<std::mutex> lock(ask->mu);
  // Each Sentinel gets its connect timeout and its reply timeout; the slack covers threads.
  ask->cv.wait_for(lock, 2 * timeout + std::chrono::milliseconds(200),
                   [&] { return ask->answer.has_value() || ask->pending == 0; });
  if (ask->answer) return *ask->answer;
  std::string what = "no Redis Sentinel named the master '" + master_name + "' (" +
                     (ask->errors.empty() ? "none answered in time" : ask->errors) + ")";
  if (ask->pending == 0 && ask->unknown > 0 && ask->unknown + ask->refused == static_cast<int>(sentinels.size())) {
    return Status::Err(EINVAL, what + "; check the master name in the META-URL against the Sentinels' "
                                      "'sentinel monitor NAME' lines");
  }
  if (ask->refused == static_cast<int>(sentinels.size())) {
    return Status::Err(ECONNREFUSED, what + "; check that the Sentinels run and the META-URL's hosts and ports");
  }
  return Status::Err(ask->first_code != 0 ? ask->first_code : EHOSTUNREACH, what);
}

}  // namespace tierfs::redis
