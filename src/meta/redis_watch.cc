#include "meta/redis_watch.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "common/backoff.h"

namespace tierfs::redis {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPoll(100);  // how often the thread looks at stop_
constexpr std::chrono::seconds kPingEvery(5);    // of silence, before asking the server
constexpr std::chrono::seconds kAnswerWithin(10);
constexpr std::chrono::milliseconds kBackoffBase(20), kBackoffCap(1000);

bool IsArrayOf(const redisReply* r, std::string_view kind, size_t min_elements) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements >= min_elements &&
         Str(r->element[0]) == kind;
}

}  // namespace

std::string ChangeChannel(int db) { return "tierfs:changes:" + std::to_string(db); }

bool ParseChange(std::string_view message, std::string* marker, std::vector<std::string>* keys) {
  keys->clear();
  size_t nl = message.find('\n');
  if (nl == std::string_view::npos) return false;
  marker->assign(message.substr(0, nl));
  size_t at = nl + 1;
  while (at < message.size()) {
    size_t colon = message.find(':', at);
    if (colon == std::string_view::npos || colon == at || colon - at > 10) return false;
    size_t len = 0;
    for (size_t i = at; i < colon; ++i) {
      if (message[i] < '0' || message[i] > '9') return false;
      len = len * 10 + static_cast<size_t>(message[i] - '0');
    }
    if (len > message.size() - colon - 1) return false;
    keys->emplace_back(message.substr(colon + 1, len));
    at = colon + 1 + len;
  }
  return true;
}

Result<std::unique_ptr<Watcher>> Watcher::Start(OpenFn open, std::string channel, std::string describe,
                                                OwnCommits* own, KvEngine::WatchFn on_change) {
  std::unique_ptr<Watcher> w(
      new Watcher(std::move(open), std::move(channel), std::move(describe), own, std::move(on_change)));
  ASSIGN_OR_RETURN(auto conn, w->Subscribe());
  w->thread_ = std::thread([p = w.get(), c = std::move(conn)]() mutable { p->Loop(std::move(c)); });
  return w;
}

Watcher::~Watcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<Conn>> Watcher::Subscribe() {
  ASSIGN_OR_RETURN(auto conn, open_());
  std::vector<Cmd> cmds;
  cmds.push_back(std::move(Cmd("SUBSCRIBE").Arg(channel_)));
  RETURN_IF_ERROR(conn->Send(cmds));
  auto deadline = Clock::now() + kAnswerWithin;
  while (!stop_ && Clock::now() < deadline) {
    Reply r;
    RETURN_IF_ERROR(conn->Receive(kPoll, &r));
    if (!r) continue;
    if (IsArrayOf(r.get(), "subscribe", 3)) return conn;
    if (IsError(r.get()) && Str(r.get()).find("NOPERM") != std::string_view::npos) {
      return Status::Err(EACCES, "Redis " + describe_ + " refuses to let this user subscribe to channel " +
                                     channel_ + " (server says \"" + std::string(Str(r.get())) +
                                     "\"): grant it with ACL SETUSER USER &" + channel_ +
                                     " for other clients' changes to show at once");
    }
    return ReplyStatus(r.get(), describe_, "subscribing to the volume's changes");
  }
  return Status::Err(ETIMEDOUT, "Redis " + describe_ + ": no answer to SUBSCRIBE within " +
                                    std::to_string(kAnswerWithin.count()) + " s");
}

Status Watcher::Serve(Conn& conn) {
  auto heard = Clock::now(), asked = heard;
  bool asking = false;
  std::string marker;
  std::vector<std::string> keys;
  while (!stop_) {
    Reply r;
    RETURN_IF_ERROR(conn.Receive(kPoll, &r));
    auto now = Clock::now();
    if (!r) {
      if (asking && now - asked > kAnswerWithin) {
        return Status::Err(ETIMEDOUT, "no answer to PING within " + std::to_string(kAnswerWithin.count()) + " s");
      }
      if (!asking && now - heard > kPingEvery) {
        std::vector<Cmd> ping;
        ping.emplace_back("PING");
        RETURN_IF_ERROR(conn.Send(ping));
        asking = true;
        asked = now;
      }
      continue;
    }
    heard = now;
    if (IsArrayOf(r.get(), "message", 3)) {
      if (!ParseChange(Str(r->element[2]), &marker, &keys)) {
        spdlog::warn("Redis {}: a malformed change message on {}: treating everything as changed", describe_,
                     channel_);
        fn_({}, true);
      } else if (!keys.empty() && !own_->Contains(marker)) {
        fn_(keys, false);
      }
    } else if (IsArrayOf(r.get(), "pong", 1)) {
      asking = false;
    } else if (IsError(r.get())) {
      return ReplyStatus(r.get(), describe_, "watching the volume's changes");
    }
  }
  return Status::OK();
}

void Watcher::Loop(std::unique_ptr<Conn> conn) {
  pthread_setname_np(pthread_self(), "redis-watch");
  int failures = 0;
  while (!stop_) {
    if (!conn) {
      auto c = Subscribe();
      if (!c.ok()) {
        if (failures == 0) {
          spdlog::warn("Redis {}: cannot watch the volume's changes yet ({}); retrying", describe_,
                       c.status().message());
        }
        auto until = Clock::now() + JitteredBackoff(failures++, kBackoffBase, kBackoffCap);
        while (!stop_ && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      conn = std::move(*c);
      if (failures > 0) spdlog::info("Redis {}: watching the volume's changes again", describe_);
      failures = 0;
      // Commits between the loss and now were not seen.
      fn_({}, true);
    }
    Status st = Serve(*conn);
    if (stop_) break;
    spdlog::warn("Redis {}: the watch of the volume's changes was lost ({}); reconnecting", describe_,
                 st.message());
    conn.reset();
    failures = 1;  // the first failed reconnect is not worth another warning
  }
}

}  // namespace tierfs::redis
