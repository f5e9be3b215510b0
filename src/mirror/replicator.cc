#include "mirror/replicator.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

#include "common/backoff.h"
#include "common/clock.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/meta.h"
#include "mirror/block_copier.h"

namespace tierfs::mirror {
namespace {

constexpr size_t kSeedBatch = 1000;            // keys per seeding transaction
constexpr size_t kBatchBytes = size_t{8} << 20;  // writes per apply transaction, at most (past one record)
constexpr int64_t kLagNoteBytes = int64_t{64} << 20;  // a copy this large is noted in MS (status shows it)

// The usage counters follow the primary (statfs on the mirror): the totals and the
// sessions' shards. The allocators (nextInode, nextSession, ...) do not: the mirror's own
// clients take session ids from the mirror's.
bool IsUsageCounter(std::string_view k) {
  return k == keys::Counter("usedSpace") || k == keys::Counter("totalInodes") || k.starts_with(keys::kUsageShardPrefix);
}
bool IsMirrored(std::string_view k) { return IsLoggedKey(k) || IsUsageCounter(k); }

std::string NewHolder() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::random_device rd;
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(rd() % 1000000);
}

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6))); }

// Waits `seconds` unless stop comes first.
void Wait(const std::atomic<bool>& stop, double seconds) {
  for (double left = seconds; left > 0 && !stop; left -= 0.05) Sleep(std::min(left, 0.05));
}

// How many keys the engine holds, counting up to `limit`.
Result<size_t> CountKeys(KvEngine* engine, size_t limit) {
  size_t n = 0;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        n = 0;
        return t.Scan("", "", limit, [&](std::string_view, std::string_view) {
          ++n;
          return true;
        });
      },
      true));
  return n;
}

}  // namespace

Replicator::Replicator(const ReplicatorOptions& o, std::unique_ptr<KvEngine> primary, std::unique_ptr<KvEngine> mirror)
    : o_(o), primary_(std::move(primary)), mirror_(std::move(mirror)), holder_(NewHolder()) {}

Replicator::~Replicator() = default;

Result<std::unique_ptr<Replicator>> Replicator::Open(const ReplicatorOptions& o) {
  if (o.batch == 0) return Status::Err(EINVAL, "--batch must be at least 1");
  if (o.lease_ttl < 1) return Status::Err(EINVAL, "--lease-ttl must be at least 1 second");
  auto primary = OpenKvEngine(o.primary_url, MissingDatabase::kMustExist);
  if (!primary.ok()) return primary.status().With("the primary");
  auto mirror = OpenKvEngine(o.mirror_url, MissingDatabase::kCreate);
  if (!mirror.ok()) return mirror.status().With("the mirror");
  if ((*primary)->Describe() == (*mirror)->Describe()) {
    return Status::Err(EINVAL, "the primary and the mirror are the same engine (" + (*primary)->Describe() + ")");
  }
  return std::unique_ptr<Replicator>(new Replicator(o, std::move(*primary), std::move(*mirror)));
}

Result<bool> Replicator::Lease() {
  const int64_t now = NowNanos();
  if (lease_until_ns_ - now > static_cast<int64_t>(o_.lease_ttl * 1e9 * 2 / 3)) return true;
  bool ours = false;
  RETURN_IF_ERROR(mirror_->Txn([&](KvTxn& t) -> Status {
    ours = false;
    ASSIGN_OR_RETURN(auto l, ReadMirrorLease(t));
    if (l && l->holder != holder_ && l->until_ns > now) return Status::OK();
    ours = true;
    return WriteMirrorLease(t, MirrorLease{holder_, now + static_cast<int64_t>(o_.lease_ttl * 1e9)});
  }));
  lease_until_ns_ = ours ? now + static_cast<int64_t>(o_.lease_ttl * 1e9) : 0;
  return ours;
}

Status Replicator::Seed() {
  // The primary must be a volume that keeps a change log.
  ASSIGN_OR_RETURN(FormatRecord fmt, Meta::ReadFormat(primary_.get()));
  if (!fmt.mirror_of.empty()) {
    return Status::Err(EINVAL, "the primary " + primary_->Describe() + " is itself a mirror (of " + fmt.mirror_of +
                                   "); mirror the volume it follows");
  }
  if (fmt.changelog_hours == 0) {
    return Status::Err(EINVAL, "the primary keeps no change log: turn it on with `tierfs config " +
                                   primary_->Describe() +
                                   " --changelog-hours N` (N hours of history; a mirror further behind must be "
                                   "re-seeded), then run the mirror again");
  }
  ASSIGN_OR_RETURN(ChangeLogBounds before, ChangeLogRange(primary_.get()));
  FormatRecord mf = fmt;
  mf.mirror_of = primary_->Describe();
  mf.changelog_hours = 0;
  mf.group_secret.clear();  // the mirror's cache group is its own
  if (!o_.store.storage.empty()) {
    // The mirror's own store; the primary's stays named as the source (read-through).
    mf.source_storage = fmt.storage;
    mf.source_bucket = fmt.bucket;
    mf.source_access_key = fmt.access_key;
    mf.source_secret_key = fmt.secret_key;
    mf.source_session_token = fmt.session_token;
    mf.source_ceph_conf = fmt.ceph_conf;
    mf.storage = o_.store.storage;
    mf.bucket = o_.store.bucket;
    mf.access_key = o_.store.access_key;
    mf.secret_key = o_.store.secret_key;
    mf.session_token = o_.store.session_token;
    mf.ceph_conf = o_.store.ceph_conf;
  }
  MirrorState st;
  st.primary = primary_->Describe();
  st.applied = before.last;
  st.seeding = true;
  // From nothing: what an interrupted seeding (or the mirror being re-seeded) holds may
  // include keys the primary has deleted since, which the log after L0 would not remove.
  RETURN_IF_ERROR(mirror_->Reset());
  // The format record and "seeding" first: a half-copied mirror is known as one. The lease
  // again (Reset removed it).
  const int64_t now = NowNanos();
  RETURN_IF_ERROR(mirror_->Txn([&](KvTxn& t) -> Status {
    RETURN_IF_ERROR(t.Put(keys::Format(), mf.ToJson()));
    RETURN_IF_ERROR(WriteMirrorLease(t, MirrorLease{holder_, now + static_cast<int64_t>(o_.lease_ttl * 1e9)}));
    return WriteMirrorState(t, st);
  }));
  lease_until_ns_ = now + static_cast<int64_t>(o_.lease_ttl * 1e9);
  reseed_done_ = true;
  // From now on the primary keeps the log after L0 and the data it releases for us.
  RETURN_IF_ERROR(Report(before.last, 0).With("registering the mirror with the primary"));
  RETURN_IF_ERROR(OpenStores());
  spdlog::info("seeding the mirror {} from {} (its change log at commit {})", mirror_->Describe(),
               primary_->Describe(), before.last);
  std::string cursor;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> kvs;
    bool more = false;
    RETURN_IF_ERROR(primary_->Txn(
        [&](KvTxn& t) -> Status {
          kvs.clear();
          more = false;
          size_t seen = 0;
          return t.Scan(cursor, "", kSeedBatch, [&](std::string_view k, std::string_view val) {
            ++seen;
            cursor.assign(k);
            cursor.push_back('\0');
            if (IsMirrored(k)) kvs.emplace_back(k, val);
            more = seen == kSeedBatch;
            return true;
          });
        },
        true));
    if (!kvs.empty()) {
      std::vector<ObjectRef> refs;
      for (const auto& [k, val] : kvs) CollectObjects(k, &val, &refs);
      RETURN_IF_ERROR(CopyObjects(std::move(refs)));
      RETURN_IF_ERROR(mirror_->Txn([&](KvTxn& t) -> Status {
        for (const auto& [k, val] : kvs) RETURN_IF_ERROR(t.Put(k, val));
        return Status::OK();
      }));
      stats_.seeded_keys += kvs.size();
    }
    if (!more) break;
  }
  ASSIGN_OR_RETURN(ChangeLogBounds after, ChangeLogRange(primary_.get()));
  st.ready_at = after.last;
  st.primary_last = after.last;
  st.checked_ns = NowNanos();
  st.seeding = st.applied < st.ready_at;
  RETURN_IF_ERROR(mirror_->Txn([&](KvTxn& t) { return WriteMirrorState(t, st); }));
  spdlog::info("copied {} keys; the mirror is consistent once commit {} is applied (now at {})", stats_.seeded_keys,
               after.last, st.applied);
  return Status::OK();
}

Result<size_t> Replicator::ApplyBatch() {
  ASSIGN_OR_RETURN(auto current, ReadMirrorState(mirror_.get()));
  if (!current) return Status::Err(EIO, "the mirror lost its state record (key MS); run with --reseed");
  MirrorState st = *current;
  // One look at the primary per batch: the counter and the records after the mirror's, by
  // key (three round trips for a full batch). The usage counters and the report of how far
  // the mirror is go at most once a second: across a slow link every round trip is lag.
  std::vector<ChangeRecord> records;
  size_t bytes = 0;
  uint64_t last = 0;  // the primary's last commit as this look found it
  RETURN_IF_ERROR(ReadChanges(
      primary_.get(), st.applied + 1, o_.batch,
      [&](const ChangeRecord& r) {
        for (const auto& [k, val] : r.writes) bytes += k.size() + (val ? val->size() : 0);
        records.push_back(r);
        return bytes < kBatchBytes;
      },
      &last));
  if (records.empty() ? last > st.applied : records.front().seq != st.applied + 1) {
    ASSIGN_OR_RETURN(ChangeLogBounds bounds, ChangeLogRange(primary_.get()));
    return Status::Err(ESTALE, "the primary's change log no longer holds commit " + std::to_string(st.applied + 1) +
                                   " (it begins at " + std::to_string(bounds.first) +
                                   "): the mirror is too far behind to follow it and must be copied again: run "
                                   "`tierfs mirror PRIMARY MIRROR --reseed`");
  }
  const int64_t now = NowNanos();
  if (records.empty()) {
    // Nothing new: say so at most every second (status's lag counts from it).
    if (now - last_checked_write_ns_ < 1'000'000'000 && st.primary_last == last) return size_t{0};
  }
  // Usage as the primary has it now (statfs; never read for a namespace), once a second.
  bool fresh_counters = false;
  if (!records.empty() && now - counters_ns_ >= 1'000'000'000) {
    RETURN_IF_ERROR(primary_->Txn(
        [&](KvTxn& t) -> Status {
          counters_.clear();
          return t.Scan("C", PrefixEnd("C"), 0, [&](std::string_view k, std::string_view val) {
            if (IsUsageCounter(k)) counters_.emplace(k, val);
            return true;
          });
        },
        true));
    counters_ns_ = now;
    fresh_counters = true;
  }
  const auto& counters = counters_;
  std::vector<ObjectRef> refs;
  for (const ChangeRecord& r : records) {
    for (const auto& [k, val] : r.writes) CollectObjects(k, val ? &*val : nullptr, &refs);
  }
  Status copied = CopyObjects(std::move(refs));
  if (!copied.ok()) {
    NoteBehind(last);  // status shows how far behind the mirror is held
    return copied;
  }
  const uint64_t expected = st.applied;
  bool lost = false;
  RETURN_IF_ERROR(mirror_->Txn([&](KvTxn& t) -> Status {
    lost = false;
    ASSIGN_OR_RETURN(auto l, ReadMirrorLease(t));
    ASSIGN_OR_RETURN(auto s, ReadMirrorState(t));
    if (!l || l->holder != holder_ || !s || s->applied != expected) {
      lost = true;  // another replicator took over, or applied meanwhile: nothing is written
      return Status::OK();
    }
    MirrorState next = *s;
    for (const ChangeRecord& r : records) {
      for (const auto& [k, val] : r.writes) RETURN_IF_ERROR(val ? t.Put(k, *val) : t.Delete(k));
      next.applied = r.seq;
      next.applied_ns = r.time_ns;
    }
    if (fresh_counters) {
      // Shards of sessions the primary since folded into the totals go.
      std::vector<std::string> gone;
      RETURN_IF_ERROR(t.Scan(keys::kUsageShardPrefix, PrefixEnd(keys::kUsageShardPrefix), 0,
                             [&](std::string_view k, std::string_view) {
                               if (!counters.count(std::string(k))) gone.emplace_back(k);
                               return true;
                             }));
      for (const auto& k : gone) RETURN_IF_ERROR(t.Delete(k));
      for (const auto& [k, val] : counters) RETURN_IF_ERROR(t.Put(k, val));
    }
    next.primary_last = std::max(last, next.applied);
    next.block_lag_bytes = 0;  // what these records reference is in the mirror's store
    next.checked_ns = now;
    if (next.seeding && next.applied >= next.ready_at) next.seeding = false;
    RETURN_IF_ERROR(WriteMirrorLease(t, MirrorLease{holder_, now + static_cast<int64_t>(o_.lease_ttl * 1e9)}));
    return WriteMirrorState(t, next);
  }));
  if (lost) {
    lease_until_ns_ = 0;
    return Status::Err(EAGAIN, "the lease passed to another replicator");
  }
  lease_until_ns_ = now + static_cast<int64_t>(o_.lease_ttl * 1e9);
  last_checked_write_ns_ = now;
  if (!records.empty()) {
    stats_.records += records.size();
    stats_.batches++;
  }
  stats_.applied = records.empty() ? expected : records.back().seq;
  {
    std::lock_guard<std::mutex> l(progress_mu_);
    progress_.applied = stats_.applied;
    progress_.applied_ns = records.empty() ? st.applied_ns : records.back().time_ns;
    progress_.primary_last = std::max(last, stats_.applied);
    progress_.checked_ns = now;
    progress_.records = stats_.records;
    progress_.objects = stats_.objects;
    progress_.bytes = stats_.bytes;
    progress_.missing = stats_.missing;
  }
  // The primary learns how far the mirror is once it caught up, at most every second while
  // it catches up, and once a minute while idle (a consumer silent for a week is forgotten).
  const bool caught_up = !records.empty() && records.back().seq >= last;
  if ((!records.empty() && (caught_up || now - reported_ns_ >= 1'000'000'000)) ||
      now - reported_ns_ > 60'000'000'000) {
    Status reported = Report(stats_.applied, records.empty() ? st.applied_ns : records.back().time_ns);
    if (!reported.ok()) spdlog::warn("cannot tell the primary how far the mirror is: {}", reported.ToString());
  }
  return records.size();
}

Replicator::Progress Replicator::progress() const {
  std::lock_guard<std::mutex> l(progress_mu_);
  Progress p = progress_;
  p.block_lag_bytes = block_left_.load();
  return p;
}

Status Replicator::Report(uint64_t applied, int64_t applied_ns) {
  ChangeConsumer c;
  c.name = "mirror:" + mirror_->Describe();
  c.what = "mirror volume in " + mirror_->Describe();
  c.applied = applied;
  c.applied_ns = applied_ns;
  c.updated_ns = NowNanos();
  RETURN_IF_ERROR(PutChangeConsumer(primary_.get(), c));
  reported_ns_ = c.updated_ns;
  return Status::OK();
}

Status Replicator::OpenStores() {
  if (copier_) return Status::OK();
  ASSIGN_OR_RETURN(FormatRecord mf, Meta::ReadFormat(mirror_.get()));
  if (!o_.store.storage.empty() && !reseed_done_ &&
      (o_.store.storage != mf.storage || o_.store.bucket != mf.bucket || mf.source_storage.empty())) {
    return Status::Err(EINVAL, "the mirror keeps its blocks in " +
                                   (mf.source_storage.empty() ? std::string("the primary's store")
                                                              : mf.storage + " " + mf.bucket) +
                                   ", not in " + o_.store.storage + " " + o_.store.bucket +
                                   ": run without --storage/--bucket, or with --reseed to copy everything anew");
  }
  if (mf.source_storage.empty()) return Status::OK();  // shared: nothing to copy
  auto from = CreateObjectStore(mf.SourceSpec());
  if (!from.ok()) return from.status().With("the primary's store");
  auto to = CreateObjectStore(mf.Spec());
  if (!to.ok()) return to.status().With("the mirror's store");
  RETURN_IF_ERROR((*to)->Init().With("the mirror's store " + (*to)->Describe()));
  primary_store_ = std::move(*from);
  mirror_store_ = std::move(*to);
  copier_ = std::make_unique<BlockCopier>(primary_store_.get(), mirror_store_.get(), primary_.get(), mf.name,
                                          mf.block_size, o_.threads);
  spdlog::info("mirror {}: blocks are copied from {} into {}", mirror_->Describe(), primary_store_->Describe(),
               mirror_store_->Describe());
  return Status::OK();
}

void Replicator::CollectObjects(std::string_view key, const std::string* value, std::vector<ObjectRef>* refs) const {
  if (copier_) copier_->Objects(key, value, refs);
}

Status Replicator::CopyObjects(std::vector<ObjectRef> refs) {
  if (refs.empty()) return Status::OK();
  int64_t total = 0;
  for (const ObjectRef& r : refs) total += static_cast<int64_t>(r.size);
  block_left_ = total;
  if (total >= kLagNoteBytes) NoteBlockLag(total);
  auto res = copier_->Copy(std::move(refs), &block_left_);
  block_left_ = 0;
  if (!res.ok()) return res.status();
  stats_.objects += res->objects;
  stats_.bytes += res->bytes;
  stats_.missing += res->missing;
  return Status::OK();
}

void Replicator::NoteBlockLag(int64_t bytes) {
  EditState([&](MirrorState& s) { s.block_lag_bytes = bytes; });
}

void Replicator::NoteBehind(uint64_t primary_last) {
  EditState([&](MirrorState& s) {
    s.primary_last = std::max(s.primary_last, primary_last);
    s.checked_ns = NowNanos();
  });
}

void Replicator::EditState(const std::function<void(MirrorState&)>& edit) {
  Status st = mirror_->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto l, ReadMirrorLease(t));
    ASSIGN_OR_RETURN(auto s, ReadMirrorState(t));
    if (!l || l->holder != holder_ || !s) return Status::OK();
    edit(*s);
    return WriteMirrorState(t, *s);
  });
  if (!st.ok()) spdlog::warn("cannot note the mirror's progress in {}: {}", mirror_->Describe(), st.ToString());
}

Status Replicator::Run(const std::atomic<bool>& stop) {
  Status st;
  for (;;) {
    st = Follow(stop);
    if (stop) st = Status::OK();
    if (stop || st.code() != EAGAIN) break;  // EAGAIN: the lease was lost; wait for it again
  }
  // Leaving: the lease goes at once (another replicator, or the next run, need not wait
  // for it to expire).
  if (lease_until_ns_ > 0) {
    Status released = mirror_->Txn([&](KvTxn& t) -> Status {
      ASSIGN_OR_RETURN(auto l, ReadMirrorLease(t));
      if (!l || l->holder != holder_) return Status::OK();
      return WriteMirrorLease(t, MirrorLease{holder_, 0});
    });
    if (!released.ok()) spdlog::warn("cannot release the lease of {}: {}", mirror_->Describe(), released.ToString());
    lease_until_ns_ = 0;
  }
  return st;
}

Status Replicator::Follow(const std::atomic<bool>& stop) {
  bool waiting_logged = false;
  int failures = 0;
  while (!stop) {
    auto ours = Lease();
    if (!ours.ok()) {
      spdlog::warn("mirror {}: cannot take the lease: {}", mirror_->Describe(), ours.status().ToString());
      Wait(stop, std::min(30.0, 0.5 * (1 << std::min(failures++, 6))));
      continue;
    }
    if (!*ours) {
      if (!waiting_logged) spdlog::info("another replicator holds the lease of {}; waiting for it", mirror_->Describe());
      waiting_logged = true;
      if (o_.once) return Status::Err(EBUSY, "another replicator is applying to " + mirror_->Describe());
      Wait(stop, o_.lease_ttl / 3);
      continue;
    }
    if (waiting_logged) spdlog::info("took over the lease of {}", mirror_->Describe());
    waiting_logged = false;
    break;
  }
  if (stop) return Status::OK();
  // A new mirror, or one whose seeding was interrupted before its copy was complete.
  auto state = ReadMirrorState(mirror_.get());
  if (!state.ok()) return state.status();
  auto read = Meta::ReadFormat(mirror_.get());
  if (!read.ok() && read.status().code() != ENOENT) return read.status();
  std::optional<FormatRecord> fmt;
  if (read.ok()) fmt = std::move(*read);
  if (fmt && fmt->mirror_of.empty()) {  // never empty an engine that holds a volume of its own, even with --reseed
    return Status::Err(EEXIST, mirror_->Describe() + " holds a volume (" + fmt->name +
                                   ") that is not a mirror; give an empty engine for the mirror");
  }
  if (!fmt) {  // a new mirror: its engine must be empty (seeding empties it)
    // Only our lease may be there (taken just above).
    ASSIGN_OR_RETURN(size_t n, CountKeys(mirror_.get(), 2));
    if (n > 1) {
      return Status::Err(ENOTEMPTY, mirror_->Describe() + " holds data but no volume: give an empty engine for the "
                                                          "mirror");
    }
  }
  const bool reseed = o_.reseed && !reseed_done_;
  if (reseed || !fmt || !*state || ((*state)->seeding && (*state)->ready_at == 0)) RETURN_IF_ERROR(Seed());
  // The mirror's store unusable (down, full, its directory gone): a running replicator
  // waits for it like for the primary; --once says so and stops.
  for (failures = 0;;) {
    Status opened = OpenStores();
    if (opened.ok()) break;
    if (o_.once || opened.code() == EINVAL) return opened;
    spdlog::warn("mirror {}: {} (retrying; the mirror keeps its last state)", mirror_->Describe(), opened.ToString());
    Wait(stop, std::min(30.0, 0.2 * (1 << std::min(failures++, 7))));
    if (stop) return Status::OK();
  }
  failures = 0;
  while (!stop) {
    auto n = ApplyBatch();
    if (!n.ok()) {
      if (n.status().code() == ESTALE) return n.status();
      if (n.status().code() == EAGAIN) return n.status();  // back to waiting for the lease
      spdlog::warn("mirror {}: {} (retrying; the mirror keeps its last state)", mirror_->Describe(),
                   n.status().ToString());
      Wait(stop, std::min(30.0, 0.2 * (1 << std::min(failures++, 7))));
      continue;
    }
    failures = 0;
    if (*n > 0) continue;
    if (o_.once) {
      ASSIGN_OR_RETURN(auto s, ReadMirrorState(mirror_.get()));
      if (s && !s->seeding) return Status::OK();
    }
    Wait(stop, o_.interval);
    if (!stop) {
      auto ours = Lease();
      if (!ours.ok() || !*ours) return Status::Err(EAGAIN, "the lease passed to another replicator");
    }
  }
  return Status::OK();
}

}  // namespace tierfs::mirror
