#include "group/cache_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "common/clock.h"
#include "common/thread_pool.h"
#include "group/wire.h"
#include "meta/meta.h"
#include "object/http_client.h"
#include "object/s3_sign.h"

namespace tierfs::group {
namespace {

int64_t WallSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

HttpClientOptions ClientOptions(const CacheGroupOptions& o) {
  HttpClientOptions h;
  h.connect_timeout_ms = o.connect_timeout_ms;
  h.io_timeout_s = std::max<long>(1, o.request_timeout_ms / 1000);
  h.total_timeout_ms = o.request_timeout_ms;
  return h;
}

CacheGroupOptions WithDefaults(CacheGroupOptions o, Meta* meta) {
  if (o.refresh_ns == 0) {
    o.refresh_ns = std::max<int64_t>(int64_t{meta->format().session_timeout_s} * 1000000000 / 5, 500000000);
  }
  if (o.member_timeout_ns == 0) o.member_timeout_ns = o.refresh_ns * 5 / 2;
  return o;
}

}  // namespace

CacheGroup::CacheGroup(Meta* meta, CacheGroupOptions options)
    : meta_(meta), opts_(WithDefaults(std::move(options), meta)),
      http_(std::make_unique<HttpClient>(ClientOptions(opts_))), ring_(std::make_shared<Ring>()),
      ask_pool_(std::make_unique<ThreadPool>("tierfs-peerask", std::max(1, opts_.ask_threads),
                                             static_cast<size_t>(std::max(1, opts_.ask_threads)))) {}

CacheGroup::~CacheGroup() {
  Stop();
  ask_pool_.reset();  // waits for asks in flight (each at most request_timeout_ms)
}

Status CacheGroup::Refresh() {
  uint64_t used = opts_.used_bytes ? opts_.used_bytes() : 0;
  Status up = meta_->UpdateSession([&](SessionInfo& s) {
    s.cache_group = opts_.name;
    s.group_addr = opts_.self_addr;
    s.group_capacity = opts_.capacity;
    s.group_used = used;
  });
  if (!up.ok()) spdlog::warn("cache group {}: cannot publish this member: {}", opts_.name, up.ToString());
  ASSIGN_OR_RETURN(auto sessions, meta_->ListSessions());
  auto next = std::make_shared<Ring>();
  std::vector<RingMember> serving;
  int64_t now = NowNanos();
  for (const SessionInfo& s : sessions) {
    if (s.cache_group != opts_.name) continue;
    bool self = s.sid == meta_->sid();
    if (!self && now - s.heartbeat_ns > opts_.member_timeout_ns) continue;  // silent: dead
    GroupMember m;
    m.sid = s.sid;
    m.host = s.host;
    m.addr = s.group_addr;
    m.mountpoint = s.mountpoint;
    m.capacity = s.group_capacity;
    m.used = s.group_used;
    m.self = self;
    next->members.push_back(m);
    if (!m.addr.empty()) serving.push_back({m.addr, m.capacity});
  }
  next->ring = HashRing(std::move(serving));
  size_t before;
  {
    std::lock_guard<std::mutex> l(mu_);
    before = ring_->ring.members().size();
    ring_ = next;
  }
  if (before != next->ring.members().size()) {
    spdlog::info("cache group {}: {} serving members", opts_.name, next->ring.members().size());
  }
  return Status::OK();
}

void CacheGroup::Start() {
  refresher_ = std::thread([this] {
    std::unique_lock<std::mutex> l(stop_mu_);
    while (!stop_cv_.wait_for(l, std::chrono::nanoseconds(opts_.refresh_ns), [&] { return stopping_; })) {
      l.unlock();
      Status st = Refresh();
      if (!st.ok()) spdlog::warn("cache group {}: cannot read the members: {}", opts_.name, st.ToString());
      l.lock();
    }
  });
}

void CacheGroup::Stop() {
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

std::shared_ptr<const CacheGroup::Ring> CacheGroup::ring() const {
  std::lock_guard<std::mutex> l(mu_);
  return ring_;
}

bool CacheGroup::IsDown(const std::string& addr) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = down_until_ms_.find(addr);
  if (it == down_until_ms_.end()) return false;
  if (MonoNanos() / 1000000 >= it->second) {
    down_until_ms_.erase(it);
    return false;
  }
  return true;
}

void CacheGroup::MarkDown(const std::string& addr, const std::string& why) {
  std::lock_guard<std::mutex> l(mu_);
  auto& until = down_until_ms_[addr];
  if (until == 0) spdlog::warn("cache group {}: member {} is unreachable ({}); its blocks come from the store for {} ms",
                               opts_.name, addr, why, opts_.down_ms);
  until = MonoNanos() / 1000000 + opts_.down_ms;
}

std::string CacheGroup::OwnerOf(const std::string& key) const {
  auto r = ring();
  int owner = r->ring.Owner(key);
  if (owner < 0) return "";
  const std::string& addr = r->ring.members()[owner].id;
  return addr == opts_.self_addr ? "" : addr;
}

Result<std::shared_ptr<const std::string>> CacheGroup::Fetch(const std::string& key, uint32_t block_len,
                                                             const StoreGet& from_store, bool* from_peer) {
  *from_peer = false;
  std::string addr = OwnerOf(key);
  if (addr.empty()) return Status::Err(ENODATA, "this member owns " + key);
  if (IsDown(addr)) {
    skipped_down_++;
    return Status::Err(EHOSTDOWN, "owner " + addr + " of " + key + " is marked down");
  }
  if (!from_store || opts_.hedge_ms <= 0) {
    auto got = Ask(addr, key, block_len, /*warm=*/!from_store);
    *from_peer = got.ok();
    return got;
  }
  // The ask runs on a thread of its own, so that a slow owner can be raced by the store.
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<std::shared_ptr<const std::string>>> result;
  };
  auto call = std::make_shared<Call>();
  bool queued = ask_pool_->TrySubmit([this, call, addr, key, block_len] {
    auto got = Ask(addr, key, block_len);
    std::lock_guard<std::mutex> l(call->mu);  // notified under the lock: the asker may be gone after
    call->result.emplace(std::move(got));
    call->cv.notify_all();
  });
  if (!queued) {
    // Every ask thread waits on slow owners: this block does not wait for another.
    ask_pool_full_++;
    return from_store();
  }
  {
    std::unique_lock<std::mutex> l(call->mu);
    auto answered = [&] { return call->result.has_value(); };
    // An owner that answered other asks within the hedge delay is alive and busy (its
    // machine, or the store behind it, is loaded): racing it would only add store GETs and
    // load, so wait for it (at most the request timeout). One that answered nothing in
    // that time may be hung: race it.
    auto delay = HedgeDelay();
    if (call->cv.wait_for(l, delay, answered) ||
        (AnsweredWithin(addr, delay) && (call->cv.wait(l, answered), true))) {
      *from_peer = call->result->ok();
      return std::move(*call->result);
    }
  }
  hedged_++;
  return from_store();
}

bool CacheGroup::AnsweredWithin(const std::string& addr, std::chrono::milliseconds window) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = last_answer_ms_.find(addr);
  return it != last_answer_ms_.end() && MonoNanos() / 1000000 - it->second <= window.count();
}

std::chrono::milliseconds CacheGroup::HedgeDelay() const {
  int64_t ms = std::max<int64_t>(opts_.hedge_ms, 4 * answer_us_.load() / 1000);
  return std::chrono::milliseconds(std::min<int64_t>(ms, opts_.request_timeout_ms));
}

Result<std::shared_ptr<const std::string>> CacheGroup::Ask(const std::string& addr, const std::string& key,
                                                           uint32_t block_len, bool warm) {
  asks_++;
  int64_t t = WallSeconds();
  int64_t t0 = MonoNanos();
  HttpRequest req;
  req.method = "GET";
  req.url = "http://" + addr + kBlockPath + "?key=" + UriEncode(key, false) + "&len=" + std::to_string(block_len) + (warm ? "&warm=1" : "");
  req.headers.emplace_back(kVolumeHeader, opts_.volume_uuid);
  req.headers.emplace_back(kTimeHeader, std::to_string(t));
  req.headers.emplace_back(kMacHeader, RequestMac(opts_.secret, opts_.volume_uuid, key, block_len, t));
  auto res = http_->Perform(req);
  if (!res.ok()) {
    unreachable_++;
    MarkDown(addr, res.status().message());
    return res.status().With("asking " + addr + " for " + key);
  }
  if (res->status != 200) {
    refused_++;
    std::string why = res->body.substr(0, 200);
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    spdlog::warn("cache group {}: {} answered {} for {}: {}", opts_.name, addr, res->status, key, why);
    return Status::Err(EIO, "member " + addr + " answered " + std::to_string(res->status) + " for " + key);
  }
  std::string_view data;
  Status ok = VerifyReply(opts_.secret, key, block_len, res->Header("x-tierfs-mac"), res->body, &data);
  if (!ok.ok()) {
    damaged_++;
    spdlog::warn("cache group {}: reply from {} not used: {}", opts_.name, addr, ok.message());
    return ok;
  }
  received_++;
  // The hedge follows how long good answers take (an owner fetching from a busy store is
  // slow, not dead): a moving average, kept in microseconds.
  int64_t us = (MonoNanos() - t0) / 1000;
  int64_t avg = answer_us_.load();
  answer_us_.store(avg == 0 ? us : (avg * 7 + us) / 8);
  {
    std::lock_guard<std::mutex> l(mu_);
    last_answer_ms_[addr] = MonoNanos() / 1000000;
  }
  size_t table = res->body.size() - data.size();
  res->body.erase(0, table);
  return std::make_shared<const std::string>(std::move(res->body));
}

std::vector<GroupMember> CacheGroup::members() const { return ring()->members; }

CacheGroupStats CacheGroup::stats() const {
  CacheGroupStats s;
  s.members = ring()->ring.members().size();
  s.asks = asks_;
  s.received = received_;
  s.unreachable = unreachable_;
  s.refused = refused_;
  s.damaged = damaged_;
  s.skipped_down = skipped_down_;
  s.hedged = hedged_;
  s.ask_pool_full = ask_pool_full_;
  return s;
}

std::string LocalAddressToward(const std::string& target_host) {
  std::string target = target_host.empty() ? "192.0.2.1" : target_host;  // TEST-NET-1: routing only
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(target.c_str(), "9", &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string out = "127.0.0.1";
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    // A UDP connect sends nothing; it only picks the route and so the source address.
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t n = sizeof local;
      char buf[INET_ADDRSTRLEN];
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) == 0 &&
          inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) {
        out = buf;
      }
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace tierfs::group
