// Sessions, heartbeats, usage counters and background cleanup (unlinked files, truncation
// masks, unreferenced slices, the leftovers of dead sessions), and the open files of this
// client, which keep an inode removed while open until its last close.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/meta.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/meta_acl.h"
#include "meta/meta_internal.h"

namespace tierfs {

using namespace internal;  // NOLINT

namespace {
Status AddCounter(KvTxn& t, const char* name, int64_t delta) {
  auto v = t.Get(keys::Counter(name));
  if (!v.ok()) return v.status();
  // Signed, and never clamped: a session that deletes what a still-live (or dead, not yet
  // folded) session created folds a negative share in, which that session's positive
  // share balances. Only the sum (GetStatFs) is clamped.
  int64_t cur = v->has_value() ? static_cast<int64_t>(keys::DecodeU64(**v)) : 0;
  cur += delta;
  return t.Put(keys::Counter(name), keys::EncodeU64(static_cast<uint64_t>(cur)));
}
}  // namespace

namespace {
// This thread's slot among the usage counters of a session: each thread that changes usage
// writes only its own key, so it knows the key's value without reading it (no round trip)
// and no two transactions of a client conflict on it.
uint32_t ThreadSlot() {
  static std::atomic<uint32_t> next{0};
  static thread_local uint32_t slot = next++;
  return slot;
}

struct Usage {
  int64_t bytes = 0, inodes = 0;
};

Usage DecodeUsage(std::string_view v) {
  ByteReader r(v);
  Usage u;
  u.bytes = static_cast<int64_t>(r.U64());
  u.inodes = static_cast<int64_t>(r.U64());
  return r.ok() ? u : Usage{};
}
std::string EncodeUsage(Usage u) {
  std::string v;
  PutU64(&v, static_cast<uint64_t>(u.bytes));
  PutU64(&v, static_cast<uint64_t>(u.inodes));
  return v;
}
// Sums the usage slots of every session (sid 0) or of one, calling fn on each key.
Status ScanShards(KvTxn& t, uint64_t sid, Usage* sum, const std::function<void(std::string_view)>& fn = {}) {
  std::string prefix = sid ? keys::UsageShardPrefix(sid) : std::string(keys::kUsageShardPrefix);
  return ScanPrefix(t, prefix, 0, [&](std::string_view k, std::string_view v) {
    Usage u = DecodeUsage(v);
    sum->bytes += u.bytes;
    sum->inodes += u.inodes;
    if (fn) fn(k);
    return true;
  });
}
}  // namespace

Status Meta::ChargedTxn(const int64_t* bytes, const int64_t* inodes, const std::function<Status(KvTxn&)>& fn) {
  auto delta = [&] { return Usage{bytes ? *bytes : 0, inodes ? *inodes : 0}; };
  const uint64_t sid = sid_;
  if (sid == 0) {  // no session (offline tools): the volume's own counters
    return engine_->Txn([&](KvTxn& t) {
      RETURN_IF_ERROR(fn(t));
      Usage d = delta();
      if (d.bytes == 0 && d.inodes == 0) return Status::OK();
      RETURN_IF_ERROR(AddCounter(t, "usedSpace", d.bytes));
      return AddCounter(t, "totalInodes", d.inodes);
    });
  }
  const uint32_t slot = ThreadSlot();
  Usage base;
  {
    std::lock_guard<std::mutex> l(usage_mu_);
    if (usage_sid_ == sid) base = Usage{usage_slots_[slot].bytes, usage_slots_[slot].inodes};
  }
  Usage applied;
  Status st = engine_->Txn([&](KvTxn& t) {
    applied = Usage{};
    RETURN_IF_ERROR(fn(t));
    // The shard is written blind (its value is base + delta): were the session ended and
    // its shards folded meanwhile, this would count base twice. The guard refuses then.
    RETURN_IF_ERROR(SessionGuardTx(t, sid));
    Usage d = delta();
    if (d.bytes == 0 && d.inodes == 0) return Status::OK();
    applied = d;
    return t.Put(keys::UsageShard(sid, slot), EncodeUsage(Usage{base.bytes + d.bytes, base.inodes + d.inodes}));
  });
  if (st.ok() && (applied.bytes || applied.inodes)) {
    std::lock_guard<std::mutex> l(usage_mu_);
    if (usage_sid_ == sid) {
      usage_slots_[slot].bytes += applied.bytes;
      usage_slots_[slot].inodes += applied.inodes;
    }
  }
  return st;
}

Status Meta::FoldUsage(uint64_t sid) {
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    Usage sum;
    std::vector<std::string> shards;
    RETURN_IF_ERROR(ScanShards(t, sid, &sum, [&](std::string_view k) { shards.emplace_back(k); }));
    if (shards.empty()) return Status::OK();
    for (const auto& k : shards) RETURN_IF_ERROR(t.Delete(k));
    RETURN_IF_ERROR(AddCounter(t, "usedSpace", sum.bytes));
    return AddCounter(t, "totalInodes", sum.inodes);
  }));
  {
    std::lock_guard<std::mutex> l(usage_mu_);
    if (sid == usage_sid_) usage_slots_.clear();
  }
  return Status::OK();
}

Result<std::set<Ino>> Meta::SustainedInodes() {
  std::set<Ino> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        return ScanPrefix(t, "SO", 0, [&](std::string_view k, std::string_view) {
          if (k.size() >= 18) out.insert(keys::DecodeU64(k.substr(10)));
          return true;
        });
      },
      true));
  return out;
}

Status Meta::RepairUsage(uint64_t bytes, uint64_t inodes) {
  return engine_->Txn([&](KvTxn& t) {
    Usage shards;
    RETURN_IF_ERROR(ScanShards(t, 0, &shards));
    RETURN_IF_ERROR(t.Put(keys::Counter("usedSpace"),
                          keys::EncodeU64(static_cast<uint64_t>(static_cast<int64_t>(bytes) - shards.bytes))));
    return t.Put(keys::Counter("totalInodes"),
                 keys::EncodeU64(static_cast<uint64_t>(static_cast<int64_t>(inodes) - shards.inodes)));
  });
}

Result<StatFs> Meta::GetStatFs() {
  StatFs s;
  s.capacity_bytes = kVolumeCapacity;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        auto used = t.Get(keys::Counter("usedSpace"));
        if (!used.ok()) return used.status();
        auto inodes = t.Get(keys::Counter("totalInodes"));
        if (!inodes.ok()) return inodes.status();
        // The volume's counters plus every session's shards: the shards are written by the
        // same transactions as the changes they count, so the sum is exact, also after a
        // client was killed (its shards stay until a live client folds them in).
        Usage sum;
        sum.bytes = used->has_value() ? static_cast<int64_t>(keys::DecodeU64(**used)) : 0;
        sum.inodes = inodes->has_value() ? static_cast<int64_t>(keys::DecodeU64(**inodes)) : 0;
        RETURN_IF_ERROR(ScanShards(t, 0, &sum));
        s.used_bytes = static_cast<uint64_t>(std::max<int64_t>(0, sum.bytes));
        s.inodes = static_cast<uint64_t>(std::max<int64_t>(0, sum.inodes));
        return Status::OK();
      },
      true));
  return s;
}

namespace internal {
std::string SessionJson(const SessionInfo& info) {
  nlohmann::json j = {{"host", info.host},         {"pid", info.pid},
                      {"mountpoint", info.mountpoint}, {"version", info.version},
                      {"started_ns", info.started_ns}};
  if (!info.cache_group.empty()) {
    j["cache_group"] = info.cache_group;
    j["group_addr"] = info.group_addr;
    j["group_capacity"] = info.group_capacity;
    j["group_used"] = info.group_used;
  }
  if (info.staged_bytes) j["staged_bytes"] = info.staged_bytes;
  if (info.resumed_from) {
    j["resumed_from"] = info.resumed_from;
    j["lost_ns"] = info.lost_ns;
    j["lost_files"] = info.lost_files;
    j["lost_locks"] = info.lost_locks;
  }
  return j.dump();
}

SessionInfo ParseSession(uint64_t sid, std::string_view v) {
  SessionInfo s;
  s.sid = sid;
  auto j = nlohmann::json::parse(v, nullptr, false);
  if (j.is_object()) {
    s.host = j.value("host", "");
    s.pid = j.value("pid", 0u);
    s.mountpoint = j.value("mountpoint", "");
    s.version = j.value("version", "");
    s.started_ns = j.value("started_ns", int64_t{0});
    s.cache_group = j.value("cache_group", "");
    s.group_addr = j.value("group_addr", "");
    s.group_capacity = j.value("group_capacity", uint64_t{0});
    s.group_used = j.value("group_used", uint64_t{0});
    s.staged_bytes = j.value("staged_bytes", uint64_t{0});
    s.resumed_from = j.value("resumed_from", uint64_t{0});
    s.lost_ns = j.value("lost_ns", int64_t{0});
    s.lost_files = j.value("lost_files", uint64_t{0});
    s.lost_locks = j.value("lost_locks", uint64_t{0});
  }
  return s;
}
}  // namespace internal

Result<std::optional<Meta::StagedMark>> Meta::StagedBy(uint64_t id) {
  std::optional<StagedMark> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.reset();
        ASSIGN_OR_RETURN(auto v, t.Get(keys::Staged(id)));
        if (!v || v->size() != 8) return Status::OK();
        StagedMark m;
        m.sid = keys::DecodeU64(*v);
        ASSIGN_OR_RETURN(auto info, t.Get(keys::Session(m.sid)));
        if (info) m.host = ParseSession(m.sid, *info).host;
        // The staging area's record names the directory, and the host once a dead
        // session's own record is gone.
        ASSIGN_OR_RETURN(auto area, t.Get(keys::StagingArea(m.sid)));
        if (area) {
          auto j = nlohmann::json::parse(*area, nullptr, false);
          if (j.is_object()) {
            m.dir = j.value("dir", "");
            if (m.host.empty()) m.host = j.value("host", "");
          }
        }
        ASSIGN_OR_RETURN(auto hb, t.Get(keys::Heartbeat(m.sid)));
        m.alive = hb && NowNanos() - static_cast<int64_t>(keys::DecodeU64(*hb)) < opts_.session_timeout_ns;
        out = std::move(m);
        return Status::OK();
      },
      /*read_only=*/true));
  return out;
}

Status Meta::UpdateSession(const std::function<void(SessionInfo&)>& edit) {
  const uint64_t sid = sid_;
  if (sid == 0) return Status::Err(EINVAL, "no session to update");
  {
    // The local copy keeps the edit for the session registered after a loss.
    std::lock_guard<std::mutex> l(session_mu_);
    edit(session_info_);
  }
  return engine_->Txn([&](KvTxn& t) {
    auto cur = t.Get(keys::Session(sid));
    if (!cur.ok()) return cur.status();
    // A session ended by another client (this one was silent too long) is not brought
    // back: the heartbeat registers a new one (HandleSessionLoss).
    if (!cur->has_value()) {
      session_gone_ = true;
      bg_cv_.notify_all();
      return Status::Err(ENOENT, "session " + std::to_string(sid) + " is gone");
    }
    SessionInfo info = ParseSession(sid, **cur);
    edit(info);
    return t.Put(keys::Session(sid), SessionJson(info));
  });
}

Status Meta::NewSession(SessionInfo info) {
  info.started_ns = NowNanos();
  const int64_t lease_start = BootNanos();
  uint64_t new_sid = 0;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    auto d = t.Get(keys::Destroying());
    if (!d.ok()) return d.status();
    if (d->has_value()) {
      return Status::Err(EBUSY, "volume " + format_.name + " is being destroyed (run `tierfs destroy` again to "
                                "finish); it cannot be used");
    }
    auto v = t.Get(keys::Counter("nextSession"));
    if (!v.ok()) return v.status();
    uint64_t sid = v->has_value() ? keys::DecodeU64(**v) : 1;
    RETURN_IF_ERROR(t.Put(keys::Counter("nextSession"), keys::EncodeU64(sid + 1)));
    RETURN_IF_ERROR(t.Put(keys::Session(sid), SessionJson(info)));
    RETURN_IF_ERROR(t.Put(keys::Heartbeat(sid), keys::EncodeU64(static_cast<uint64_t>(info.started_ns))));
    new_sid = sid;
    return Status::OK();
  }));
  {
    std::lock_guard<std::mutex> l(usage_mu_);
    usage_slots_.clear();  // a new session's slots start at zero
    usage_sid_ = new_sid;
  }
  {
    std::lock_guard<std::mutex> l(session_mu_);
    info.sid = new_sid;
    session_info_ = info;
  }
  lease_start_ns_ = lease_start;
  session_gone_ = false;
  sid_ = new_sid;
  return Status::OK();
}

Status Meta::MarkDestroying(bool on) {
  return engine_->Txn([&](KvTxn& t) {
    if (!on) return t.Delete(keys::Destroying());
    return t.Put(keys::Destroying(), keys::EncodeU64(static_cast<uint64_t>(NowNanos())));
  });
}

Result<std::vector<SessionInfo>> Meta::ListSessions() {
  std::vector<SessionInfo> out;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        out.clear();
        RETURN_IF_ERROR(ScanPrefix(t, std::string(keys::kSessionPrefix), 0, [&](std::string_view k, std::string_view v) {
          uint64_t sid = 0;
          keys::ParseInoKey(k, &sid);
          out.push_back(ParseSession(sid, v));
          return true;
        }));
        for (auto& s : out) {
          auto hb = t.Get(keys::Heartbeat(s.sid));
          if (!hb.ok()) return hb.status();
          s.heartbeat_ns = hb->has_value() ? static_cast<int64_t>(keys::DecodeU64(**hb)) : 0;
        }
        return Status::OK();
      },
      true));
  return out;
}

Status Meta::DropSustainedTx(KvTxn& t, uint64_t sid, Ino ino, int64_t* usage, int64_t* inodes) {
  *usage = *inodes = 0;
  auto held = t.Get(keys::Sustained(sid, ino));
  if (!held.ok()) return held.status();
  if (!held->has_value()) return Status::OK();
  RETURN_IF_ERROR(t.Delete(keys::Sustained(sid, ino)));
  Attr a;
  Status st = GetAttrTx(t, ino, &a);
  if (st.code() == ENOENT) return Status::OK();
  RETURN_IF_ERROR(st);
  if (a.nlink > 0) return Status::OK();
  // A file is charged to the volume until its data goes; a directory stopped counting when
  // it was removed. Open here too (another session held it): DropLink keeps it for us.
  if (a.IsRegular() && !IsOpen(ino)) {
    *usage = -ChargedBytes(a.length);
    *inodes = -1;
  }
  return DropLink(t, ino, &a, NowNanos());
}

// Removes everything a session left: its sustained (open-unlinked) inodes, its locks and
// its records. Used for our own clean shutdown and for dead sessions of other clients.
Status Meta::PurgeSession(uint64_t sid) {
  KvEngine* engine = engine_.get();
  std::vector<Ino> sustained, locked;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        sustained.clear();
        locked.clear();
        RETURN_IF_ERROR(ScanPrefix(t, keys::SustainedPrefix(sid), 0, [&](std::string_view k, std::string_view) {
          sustained.push_back(keys::DecodeU64(k.substr(10)));
          return true;
        }));
        return ScanPrefix(t, keys::SessionLockPrefix(sid), 0, [&](std::string_view k, std::string_view) {
          locked.push_back(keys::DecodeU64(k.substr(10)));
          return true;
        });
      },
      true));
  for (Ino ino : sustained) {
    int64_t usage = 0, inodes = 0;
    RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) { return DropSustainedTx(t, sid, ino, &usage, &inodes); }));
  }
  for (Ino ino : locked) {
    RETURN_IF_ERROR(engine->Txn([&](KvTxn& t) {
      std::vector<std::string> dead;
      auto collect = [&](std::string_view k, std::string_view) {
        if (keys::DecodeU64(k.substr(10)) == sid) dead.emplace_back(k);
        return true;
      };
      RETURN_IF_ERROR(ScanPrefix(t, keys::FlockPrefix(ino), 0, collect));
      RETURN_IF_ERROR(ScanPrefix(t, keys::PlockPrefix(ino), 0, collect));
      for (auto& k : dead) RETURN_IF_ERROR(t.Delete(k));
      return t.Delete(keys::SessionLock(sid, ino));
    }));
  }
  // The session's usage shards go into the volume's counters (after the sustained inodes
  // above were charged to them).
  RETURN_IF_ERROR(FoldUsage(sid));
  return engine->Txn([&](KvTxn& t) {
    RETURN_IF_ERROR(t.Delete(keys::Session(sid)));
    return t.Delete(keys::Heartbeat(sid));
  });
}

Status Meta::CloseSession() {
  if (sid_ == 0) return Status::OK();
  RETURN_IF_ERROR(PurgeSession(sid_));
  sid_ = 0;
  return Status::OK();
}

Status Meta::HoldForReaders(std::vector<std::pair<uint64_t, uint32_t>>* due,
                            std::string (*key)(const std::pair<uint64_t, uint32_t>&)) {
  if (due->empty()) return Status::OK();
  if (!release_hold_) release_hold_ = std::make_unique<ReleaseHold>();
  std::vector<std::string> keys;
  keys.reserve(due->size());
  for (const auto& d : *due) keys.push_back(key(d));
  ASSIGN_OR_RETURN(std::vector<size_t> go, release_hold_->MayGo(engine_.get(), keys));
  if (go.size() == due->size()) return Status::OK();
  std::vector<std::pair<uint64_t, uint32_t>> kept;
  kept.reserve(go.size());
  for (size_t i : go) kept.push_back((*due)[i]);
  due->swap(kept);
  return Status::OK();
}

Status Meta::RunCleanupOnce() {
  if (opts_.read_only) return Status::OK();
  RETURN_IF_ERROR(CleanDeadSessions());
  // Truncation masks.
  std::vector<std::pair<Ino, uint64_t>> truncs;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        truncs.clear();
        return ScanPrefix(t, std::string(keys::kPendingTruncPrefix), 1000, [&](std::string_view k, std::string_view) {
          if (k.size() == 17) truncs.emplace_back(keys::DecodeU64(k.substr(1, 8)), keys::DecodeU64(k.substr(9)));
          return true;
        });
      },
      true));
  for (auto [ino, seq] : truncs) {
    bool done = false;
    for (int round = 0; round < 64 && !done; ++round) RETURN_IF_ERROR(ApplyTruncRule(ino, seq, &done));
  }
  // Unlinked files.
  std::vector<Ino> files;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        files.clear();
        return ScanPrefix(t, std::string(keys::kPendingFilePrefix), 1000, [&](std::string_view k, std::string_view) {
          Ino ino;
          if (keys::ParseInoKey(k, &ino)) files.push_back(ino);
          return true;
        });
      },
      true));
  for (size_t pos = 0, rounds = 0; pos < files.size() && rounds < 100000; ++rounds) {
    size_t finished = 0;
    RETURN_IF_ERROR(DeleteFilesData(std::vector<Ino>(files.begin() + static_cast<long>(pos), files.end()), &finished));
    pos += finished;
  }
  RETURN_IF_ERROR(CleanPendingSlices());
  return CleanPendingPacks();
}

Result<bool> Meta::ClaimBackup(int64_t interval_ns) {
  if (opts_.read_only || sid_ == 0) return false;
  bool mine = false;
  RETURN_IF_ERROR(engine_->Txn([&](KvTxn& t) {
    mine = false;
    auto v = t.Get(keys::BackupTurn());
    if (!v.ok()) return v.status();
    uint64_t last = 0, owner = 0, until = 0;
    if (v->has_value()) {
      ByteReader r(**v);
      last = r.U64();
      owner = r.U64();
      until = r.U64();
    }
    const int64_t now = NowNanos();
    if (now - static_cast<int64_t>(last) < interval_ns) return Status::OK();
    if (owner != 0 && owner != sid_ && now < static_cast<int64_t>(until)) return Status::OK();
    std::string nv;
    PutU64(&nv, last);
    PutU64(&nv, sid_);
    PutU64(&nv, static_cast<uint64_t>(now + 3600LL * 1'000'000'000));
    mine = true;
    return t.Put(keys::BackupTurn(), nv);
  }));
  return mine;
}

Status Meta::BackupDone(bool ok) {
  return engine_->Txn([&](KvTxn& t) {
    auto v = t.Get(keys::BackupTurn());
    if (!v.ok()) return v.status();
    uint64_t last = 0;
    if (v->has_value()) last = ByteReader(**v).U64();
    std::string nv;
    PutU64(&nv, ok ? static_cast<uint64_t>(NowNanos()) : last);
    PutU64(&nv, 0);
    PutU64(&nv, 0);
    return t.Put(keys::BackupTurn(), nv);
  });
}

Result<bool> Meta::HasPendingFiles() {
  bool any = false;
  RETURN_IF_ERROR(engine_->Txn(
      [&](KvTxn& t) {
        any = false;
        for (std::string_view prefix : {keys::kPendingFilePrefix, keys::kPendingTruncPrefix}) {
          RETURN_IF_ERROR(ScanPrefix(t, std::string(prefix), 1, [&](std::string_view, std::string_view) {
            any = true;
            return false;
          }));
        }
        return Status::OK();
      },
      true));
  return any;
}

void Meta::StartBackground(DeleteSliceFn delete_slice) {
  delete_slice_ = std::move(delete_slice);
  bg_stop_ = false;
  hb_ = std::thread([this] { HeartbeatLoop(); });
  bg_ = std::thread([this] { BackgroundLoop(); });
}

void Meta::StopBackground() {
  {
    std::lock_guard<std::mutex> l(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_.joinable()) bg_.join();
  if (hb_.joinable()) hb_.join();
}

// Cleanup, trash expiry: long work on a slow store, never in the heartbeat's way (that has
// a thread of its own, meta_liveness.cc).
void Meta::BackgroundLoop() {
  pthread_setname_np(pthread_self(), "meta-bg");
  int64_t last_cleanup = 0;
  std::unique_lock<std::mutex> l(bg_mu_);
  while (!bg_stop_) {
    bg_cv_.wait_for(l, std::chrono::seconds(1));
    if (bg_stop_) break;
    l.unlock();
    DropKernelHeld();
    int64_t now = MonoNanos();
    Status st;
    if (now - last_cleanup >= 2'000'000'000) {
      st = RunCleanupOnce();
      if (!st.ok()) spdlog::warn("background cleanup failed: {}", st.ToString());
      last_cleanup = MonoNanos();
    }
    if (!opts_.read_only && now - trash_checked_mono_ns_ >= 60'000'000'000) {
      trash_checked_mono_ns_ = now;
      st = ExpireTrash(NowNanos());
      if (!st.ok()) spdlog::warn("expiring the trash failed: {}", st.ToString());
      if (format_.changelog_hours > 0) {
        // A registered reader (a mirror) keeps the records it has not read yet.
        auto floor = ChangeConsumersFloor(engine_.get(), NowNanos());
        auto trimmed = floor.ok() ? TrimChangeLog(engine_.get(),
                                                  NowNanos() - int64_t{format_.changelog_hours} * 3600'000'000'000,
                                                  *floor ? **floor + 1 : UINT64_MAX)
                                  : Result<uint64_t>(floor.status());
        if (!trimmed.ok()) spdlog::warn("trimming the change log failed: {}", trimmed.status().ToString());
        // Records a minute old into compressed blocks (change_log.h): a reader that keeps
        // up has read them by then.
        auto packed = CompactChangeLog(engine_.get(), NowNanos() - 60'000'000'000, &changelog_packed_to_);
        if (!packed.ok()) spdlog::warn("compacting the change log failed: {}", packed.status().ToString());
      }
    }
    l.lock();
  }
}

// ---- open files ----

Result<Attr> Meta::Open(const Ctx& ctx, Ino ino, int flags, std::vector<SliceRecord>* first_chunk) {
  // Counted before the inode is read: a removal of its last name by this client either
  // sees the open and keeps the inode (DropLink), or frees it and is seen below.
  {
    std::lock_guard<std::mutex> l(open_mu_);
    open_count_[ino]++;
  }
  Attr a;
  acl::Acl access;
  Status st = engine_->Txn(
      [&](KvTxn& t) {
        if (first_chunk) {
          // One round trip where reads are round trips (a directory's chunk scans find nothing).
          RETURN_IF_ERROR(t.Prefetch({keys::Inode(ino)}, {keys::ChunkPrefix(ino, 0), keys::TruncRulesPrefix(ino)}));
        }
        RETURN_IF_ERROR(GetAttrTx(t, ino, &a));
        RETURN_IF_ERROR(LoadAccessAclTx(t, ctx, ino, a, &access));  // reads only when it must
        if (first_chunk && a.IsRegular() && a.length > 0) return ReadChunkTx(t, ino, 0, first_chunk);
        return Status::OK();
      },
      true);
  if (st.ok()) st = CheckOpen(ctx, a, &access, flags);
  // The inode is gone, or going (a removal that did not see this open read it first): the
  // kernel resolved a name that was removed meanwhile. ESTALE makes it look the name up
  // again, so open(O_CREAT) creates the file anew, as on a local file system.
  if (st.code() == ENOENT || (st.ok() && FreedHere(ino))) {
    st = Status::Err(ESTALE, "inode " + std::to_string(ino) + " was removed");
  }
  if (!st.ok()) {
    Release(ino).ok();
    return st;
  }
  return a;
}

Status Meta::OpenWithAttr(const Ctx& ctx, Ino ino, int flags, const Attr& a) {
  if (internal::NeedsAccessAcl(ctx, a)) return Status::Err(EAGAIN, "the access check needs the ACL");
  acl::Acl none;
  RETURN_IF_ERROR(CheckOpen(ctx, a, &none, flags));
  std::lock_guard<std::mutex> l(open_mu_);
  if (freed_.count(ino)) return Status::Err(EAGAIN, "removed meanwhile: open through the engine");
  open_count_[ino]++;
  return Status::OK();
}

bool Meta::FreedHere(Ino ino) {
  std::lock_guard<std::mutex> l(open_mu_);
  return freed_.count(ino) > 0;
}

void Meta::NoteFreed(Ino ino) {
  std::lock_guard<std::mutex> l(open_mu_);
  if (freed_.size() >= 4096) {
    // Opens that raced with a removal are over within seconds; inode numbers are never reused.
    const int64_t old = MonoNanos() - 60'000'000'000;
    for (auto it = freed_.begin(); it != freed_.end();) it = it->second < old ? freed_.erase(it) : std::next(it);
    if (freed_.size() >= 4096) freed_.clear();
  }
  freed_[ino] = MonoNanos();
}

Status Meta::CheckOpen(const Ctx& ctx, const Attr& a, const acl::Acl* access, int flags) {
  int mask = 0;
  switch (flags & O_ACCMODE) {
    case O_RDONLY: mask = R_OK; break;
    case O_WRONLY: mask = W_OK; break;
    default: mask = R_OK | W_OK; break;
  }
  // execve(2) opens the file read-only with __FMODE_EXEC, which open(2) cannot pass: the
  // program needs execute permission, not read permission (a mode of --x runs, as on ext4).
  if ((flags & O_ACCMODE) == O_RDONLY && (flags & kOpenForExec)) mask = X_OK;
  if (flags & O_TRUNC) mask |= W_OK;
  if (a.IsDir() && (mask & W_OK)) return Status::Err(EISDIR, "cannot open a directory for writing");
  if (opts_.read_only && (mask & W_OK)) return Status::Err(EROFS, "volume mounted read-only");
  if ((a.flags & kAttrInTrash) && !ctx.outside_trash) {
    if (mask & W_OK) return TrashReadOnly();
    if (ctx.uid != 0 && ctx.uid != a.uid) return Status::Err(EACCES, "only its owner and root may use a trash entry");
  }
  return acl::CheckAccess(ctx, a, access, mask);
}

void Meta::OpenCreated(Ino ino) {
  std::lock_guard<std::mutex> l(open_mu_);
  open_count_[ino]++;
}

bool Meta::IsOpen(Ino ino) {
  std::lock_guard<std::mutex> l(open_mu_);
  auto it = open_count_.find(ino);
  return it != open_count_.end() && it->second > 0;
}

Status Meta::Release(Ino ino, bool kernel_holds) {
  {
    std::lock_guard<std::mutex> l(open_mu_);
    auto it = open_count_.find(ino);
    if (it == open_count_.end()) return Status::OK();
    if (--it->second > 0) return Status::OK();
    open_count_.erase(it);
    // Only inodes unlinked while open here need a transaction at the last close.
    if (sustained_.count(ino) == 0) return Status::OK();
    if (kernel_holds) {
      kernel_held_[ino] = MonoNanos();
      return Status::OK();
    }
    sustained_.erase(ino);
    kernel_held_.erase(ino);
  }
  int64_t usage = 0, inodes = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) { return DropSustainedTx(t, sid_, ino, &usage, &inodes); }));
  return Status::OK();
}

Status Meta::Forgotten(Ino ino) {
  {
    std::lock_guard<std::mutex> l(open_mu_);
    if (kernel_held_.erase(ino) == 0) return Status::OK();
    // Opened again meanwhile: its last Release decides.
    if (open_count_.count(ino)) return Status::OK();
    if (sustained_.erase(ino) == 0) return Status::OK();
  }
  int64_t usage = 0, inodes = 0;
  RETURN_IF_ERROR(ChargedTxn(&usage, &inodes, [&](KvTxn& t) { return DropSustainedTx(t, sid_, ino, &usage, &inodes); }));
  return Status::OK();
}

void Meta::DropKernelHeld() {
  std::vector<Ino> due;
  {
    std::lock_guard<std::mutex> l(open_mu_);
    const int64_t now = MonoNanos();
    for (const auto& [ino, since] : kernel_held_) {
      if (now - since >= kKernelHoldNs) due.push_back(ino);
    }
  }
  for (Ino ino : due) {
    Status st = Forgotten(ino);
    if (!st.ok()) spdlog::warn("deleting removed inode {} failed (the session's end will): {}", ino, st.ToString());
  }
}

}  // namespace tierfs
