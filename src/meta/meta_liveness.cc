// Whether a client is alive, decided the same way by itself and by the others: the
// heartbeat (a thread of its own), the lease that lets a client write records naming its
// session without looking, ending the sessions of silent clients, and what a client does
// when it finds its own session ended (meta.h, "liveness of this client's session").
//
// The two transactions that decide:
// - Beat: reads "SE" sid; if present writes "SH" sid = now, else reports the session gone
//   (and never writes a heartbeat for a session that no longer exists).
// - EndDeadSession: reads "SH" sid; if older than the session timeout, deletes "SE" and
//   "SH" and writes "SP" sid (the record of the purge), all at once.
// Both read what the other writes, so on every engine (serializable transactions) either the
// heartbeat commits first and the purge sees it fresh, or the purge commits first and the
// heartbeat sees the session gone. The leftovers (locks, open-unlinked inodes, usage shares)
// are removed afterwards by PurgeSession, in as many transactions as they need; the "SP"
// record says whether that finished, so a purger that dies half-way is followed by another.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

namespace {
// A purged session's record is kept this long after its leftovers were removed.
constexpr int64_t kPurgedRecordNs = 24LL * 3600 * 1'000'000'000;

std::string PurgedJson(const PurgedSession& p) {
  nlohmann::json j = nlohmann::json::parse(SessionJson(p.info));
  j["heartbeat_ns"] = p.info.heartbeat_ns;
  j["purged_ns"] = p.purged_ns;
  j["purged_by"] = p.purged_by;
  j["purged_by_host"] = p.purged_by_host;
  j["done"] = p.done;
  return j.dump();
}

PurgedSession ParsePurged(uint64_t sid, std::string_view v) {
  PurgedSession p;
  p.info = ParseSession(sid, v);
  auto j = nlohmann::json::parse(v, nullptr, false);
  if (j.is_object()) {
    p.info.heartbeat_ns = j.value("heartbeat_ns", int64_t{0});
    p.purged_ns = j.value("purged_ns", int64_t{0});
    p.purged_by = j.value("purged_by", uint64_t{0});
    p.purged_by_host = j.value("purged_by_host", "");
    p.done = j.value("done", false);
  }
  return p;
}

std::string ThisHost() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}
}  // namespace

bool Meta::LeaseFresh() const {
  return sid_.load() != 0 && BootNanos() - lease_start_ns_.load() < opts_.session_timeout_ns / 2;
}

Status Meta::SessionGuardTx(KvTxn& t, uint64_t sid) {
  if (sid == 0 || (sid == sid_.load() && LeaseFresh())) return Status::OK();
  ASSIGN_OR_RETURN(auto v, t.Get(keys::Session(sid)));
  if (v) return Status::OK();
  if (sid == sid_.load()) {
    session_gone_ = true;
    bg_cv_.notify_all();
  }
  return Status::Err(EIO, "this client's session " + std::to_string(sid) +
                              " was ended by another client after its heartbeats stopped for the session timeout "
                              "(see the client's log); nothing was changed");
}

Status Meta::Beat(bool* gone) {
  *gone = false;
  const uint64_t sid = sid_;
  if (sid == 0) return Status::OK();
  const int64_t start = BootNanos();
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    *gone = false;
    ASSIGN_OR_RETURN(auto s, t.Get(keys::Session(sid)));
    if (!s) {
      *gone = true;
      return Status::OK();
    }
    return t.Put(keys::Heartbeat(sid), keys::EncodeU64(static_cast<uint64_t>(NowNanos())));
  }));
  if (!*gone && sid_.load() == sid) lease_start_ns_ = start;
  return Status::OK();
}

Status Meta::CheckSession() {
  if (LeaseFresh() && !session_gone_) return Status::OK();
  const int64_t now = BootNanos();
  int64_t last = last_check_ns_.load();
  if (!session_gone_ && now - last < 1'000'000'000) return Status::OK();
  if (!last_check_ns_.compare_exchange_strong(last, now)) return Status::OK();  // another caller checks
  std::lock_guard<std::mutex> l(beat_mu_);
  if (LeaseFresh() && !session_gone_) return Status::OK();  // the heartbeat thread was first
  bool gone = false;
  RETURN_IF_ERROR(Beat(&gone));
  if (gone || session_gone_) return HandleSessionLoss(sid_);
  return Status::OK();
}

void Meta::HeartbeatLoop() {
  pthread_setname_np(pthread_self(), "meta-heartbeat");
  int64_t next = 0;  // due at once
  std::unique_lock<std::mutex> l(bg_mu_);
  while (!bg_stop_) {
    const int64_t now = MonoNanos();
    if (now < next && !session_gone_) {
      bg_cv_.wait_for(l, std::chrono::nanoseconds(std::min<int64_t>(next - now, 1'000'000'000)));
      continue;
    }
    l.unlock();
    next = MonoNanos() + opts_.heartbeat_ns;
    if (sid_ != 0) {
      std::lock_guard<std::mutex> b(beat_mu_);
      bool gone = false;
      Status st = Beat(&gone);
      if (!st.ok()) {
        spdlog::warn("session heartbeat failed (retrying in 1 s): {}", st.ToString());
        next = MonoNanos() + std::min<int64_t>(opts_.heartbeat_ns, 1'000'000'000);
      } else if (gone || session_gone_) {
        st = HandleSessionLoss(sid_);
        if (!st.ok()) {
          spdlog::error("registering a new session failed (retrying in 1 s): {}", st.ToString());
          next = MonoNanos() + 1'000'000'000;
        }
      }
    }
    l.lock();
  }
}

// Called with beat_mu_ held.
Status Meta::HandleSessionLoss(uint64_t old_sid) {
  if (old_sid == 0 || old_sid != sid_.load()) return Status::OK();
  const int64_t found = NowNanos();
  const int64_t lease_age = BootNanos() - lease_start_ns_.load();
  SessionLoss loss;
  loss.old_sid = old_sid;
  loss.found_ns = found;
  loss.last_beat_ns = found - lease_age;
  // What the other client wrote when it ended the session (best effort: only for the log).
  Status rd = engine_->Txn(
      [&](KvTxn& t) {
        ASSIGN_OR_RETURN(auto v, t.Get(keys::PurgedSession(old_sid)));
        if (v) {
          PurgedSession p = ParsePurged(old_sid, *v);
          loss.purged_by = (p.purged_by_host.empty() ? std::string("an offline tool") : p.purged_by_host) +
                           (p.purged_by ? " (session " + std::to_string(p.purged_by) + ")" : std::string());
        }
        return Status::OK();
      },
      true);
  (void)rd;
  SessionInfo info;
  {
    std::lock_guard<std::mutex> l(session_mu_);
    info = session_info_;
  }
  {
    std::lock_guard<std::mutex> l(open_mu_);
    loss.sustained = sustained_;
  }
  info.resumed_from = old_sid;
  info.lost_ns = found;
  info.lost_files = loss.sustained.size();
  info.lost_locks = 0;  // the handler counts them (UpdateSession)
  info.staged_bytes = 0;
  RETURN_IF_ERROR(NewSession(info));
  loss.new_sid = sid_;
  {
    // The purge (or this client's own earlier loss) took care of these.
    std::lock_guard<std::mutex> l(open_mu_);
    for (Ino ino : loss.sustained) sustained_.erase(ino);
  }
  session_losses_++;
  spdlog::error(
      "this client's session {} was ended by {} after no heartbeat for the session timeout ({} s; this client's last "
      "heartbeat was {:.1f} s ago): the locks it held are lost and {} open file(s) unlinked earlier are gone; "
      "their open descriptors now fail with EIO. Continuing as session {}.",
      old_sid, loss.purged_by.empty() ? "another client" : loss.purged_by, opts_.session_timeout_ns / 1000000000,
      static_cast<double>(lease_age) / 1e9, loss.sustained.size(), loss.new_sid);
  // Blocks this client still stages for write-back are marked with the old session: other
  // clients would take them for a dead client's and fail their reads. They are this
  // session's now.
  Status marks = engine_->Txn([&](KvTxn& t) {
    std::vector<std::string> mine;
    RETURN_IF_ERROR(ScanPrefix(t, std::string(keys::kStagedPrefix), 0, [&](std::string_view k, std::string_view v) {
      if (v.size() == 8 && keys::DecodeU64(v) == old_sid) mine.emplace_back(k);
      return true;
    }));
    for (const auto& k : mine) RETURN_IF_ERROR(t.Put(k, keys::EncodeU64(loss.new_sid)));
    // The record of where they wait follows them (meta_staging.cc).
    ASSIGN_OR_RETURN(auto area, t.Get(keys::StagingArea(old_sid)));
    if (area) {
      RETURN_IF_ERROR(t.Put(keys::StagingArea(loss.new_sid), *area));
      RETURN_IF_ERROR(t.Delete(keys::StagingArea(old_sid)));
    }
    return Status::OK();
  });
  if (!marks.ok()) spdlog::warn("moving the staged marks to session {} failed: {}", loss.new_sid, marks.ToString());
  std::function<void(const SessionLoss&)> fn;
  {
    std::lock_guard<std::mutex> l(session_mu_);
    fn = loss_fn_;
  }
  if (fn) fn(loss);
  return Status::OK();
}

void Meta::SetSessionLossHandler(std::function<void(const SessionLoss&)> fn) {
  // A handler running now (under beat_mu_) finishes before it is replaced: the vfs clears
  // it in its destructor.
  std::lock_guard<std::mutex> b(beat_mu_);
  std::lock_guard<std::mutex> l(session_mu_);
  loss_fn_ = std::move(fn);
}

Status Meta::EndDeadSession(uint64_t sid, bool* ended) {
  const uint64_t me = sid_;
  const std::string host = ThisHost();
  PurgedSession rec;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    *ended = false;
    ASSIGN_OR_RETURN(auto hb, t.Get(keys::Heartbeat(sid)));
    const int64_t now = NowNanos();
    if (!hb || now - static_cast<int64_t>(keys::DecodeU64(*hb)) <= opts_.session_timeout_ns) return Status::OK();
    ASSIGN_OR_RETURN(auto info, t.Get(keys::Session(sid)));
    rec = PurgedSession{};
    if (info) rec.info = ParseSession(sid, *info);
    rec.info.sid = sid;
    rec.info.heartbeat_ns = static_cast<int64_t>(keys::DecodeU64(*hb));
    rec.purged_ns = now;
    rec.purged_by = me;
    rec.purged_by_host = host;
    // The session record goes first, in this transaction: from here on the client's own
    // heartbeat and guards see it gone.
    RETURN_IF_ERROR(t.Delete(keys::Session(sid)));
    RETURN_IF_ERROR(t.Delete(keys::Heartbeat(sid)));
    RETURN_IF_ERROR(t.Put(keys::PurgedSession(sid), PurgedJson(rec)));
    *ended = true;
    return Status::OK();
  }));
  if (*ended) {
    spdlog::warn("session {} ({} pid {} on {}) sent no heartbeat for {:.0f} s (timeout {} s): ended it; cleaning its "
                 "locks and open files",
                 sid, rec.info.host, rec.info.pid, rec.info.mountpoint,
                 static_cast<double>(rec.purged_ns - rec.info.heartbeat_ns) / 1e9, opts_.session_timeout_ns / 1000000000);
  }
  return Status::OK();
}

Status Meta::CleanDeadSessions() {
  const int64_t now = NowNanos();
  std::vector<uint64_t> stale;
  std::vector<std::pair<uint64_t, PurgedSession>> purged;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        stale.clear();
        purged.clear();
        RETURN_IF_ERROR(ScanPrefix(t, "SH", 0, [&](std::string_view k, std::string_view v) {
          uint64_t sid = 0;
          keys::ParseInoKey(k, &sid);
          int64_t hb = static_cast<int64_t>(keys::DecodeU64(v));
          if (sid != sid_ && now - hb > opts_.session_timeout_ns) stale.push_back(sid);
          return true;
        }));
        return ScanPrefix(t, std::string(keys::kPurgedSessionPrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t sid = 0;
          keys::ParseInoKey(k, &sid);
          purged.emplace_back(sid, ParsePurged(sid, v));
          return true;
        });
      },
      true));
  for (uint64_t sid : stale) {
    bool ended = false;
    RETURN_IF_ERROR(EndDeadSession(sid, &ended));
    if (ended) purged.emplace_back(sid, PurgedSession{});  // its leftovers next
  }
  for (auto& [sid, p] : purged) {
    if (p.done) {
      if (now - p.purged_ns > kPurgedRecordNs) {
        RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) { return t.Delete(keys::PurgedSession(sid)); }));
      }
      continue;
    }
    RETURN_IF_ERROR(PurgeSession(sid));
    RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
      ASSIGN_OR_RETURN(auto v, t.Get(keys::PurgedSession(sid)));
      if (!v) return Status::OK();
      PurgedSession cur = ParsePurged(sid, *v);
      cur.done = true;
      cur.purged_ns = std::max(cur.purged_ns, int64_t{0});
      return t.Put(keys::PurgedSession(sid), PurgedJson(cur));
    }));
  }
  return Status::OK();
}

Result<std::vector<PurgedSession>> Meta::ListPurgedSessions() {
  std::vector<PurgedSession> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, std::string(keys::kPurgedSessionPrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t sid = 0;
          keys::ParseInoKey(k, &sid);
          out.push_back(ParsePurged(sid, v));
          return true;
        });
      },
      true));
  std::sort(out.begin(), out.end(), [](const PurgedSession& a, const PurgedSession& b) { return a.purged_ns > b.purged_ns; });
  return out;
}

}  // namespace tierfs
