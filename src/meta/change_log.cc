#include "meta/change_log.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "common/encoding.h"
#include "common/clock.h"
#include "meta/change_log_watch.h"
#include "meta/key_schema.h"

namespace tierfs {
namespace {

constexpr std::string_view kLogPrefix = "H";
thread_local int unlogged_depth = 0;
thread_local uint64_t last_appended_seq = 0;
constexpr size_t kBatch = 1000;
constexpr size_t kGetBatch = 500;  // keys per GetMany: one round trip on Redis and PostgreSQL (512)

std::string SeqCounter() { return keys::Counter("changeSeq"); }

// Passes every call through and remembers the logged writes (the last value of each key).
class LoggingTxn final : public KvTxn {
 public:
  explicit LoggingTxn(KvTxn& in) : in_(in) {}
  Result<std::optional<std::string>> Get(std::string_view key) override {
    // The first read of a namespace key fetches the counter with it, in the same round trip
    // (Redis, PostgreSQL): a transaction that reads the namespace usually changes it, and
    // Append then needs no round trip of its own (a create over Redis: one in four or five).
    // Only namespace reads: a transaction of a client's own bookkeeping (heartbeats) would
    // otherwise conflict with every commit of the volume on Redis, which watches the counter.
    if (!counter_ && IsLoggedKey(key)) {
      ASSIGN_OR_RETURN(auto both, in_.GetMany({std::string(key), SeqCounter()}));
      counter_ = std::move(both[1]);
      return std::move(both[0]);
    }
    return in_.Get(key);
  }
  Status Put(std::string_view key, std::string_view value) override {
    RETURN_IF_ERROR(in_.Put(key, value));
    if (IsLoggedKey(key)) writes_[std::string(key)] = std::string(value);
    return Status::OK();
  }
  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(in_.Delete(key));
    if (IsLoggedKey(key)) writes_[std::string(key)] = std::nullopt;
    return Status::OK();
  }
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view indirect_prefix, size_t n,
                                                              std::string_view indirect_suffix) override {
    return in_.GetIndirect(direct, indirect_prefix, n, indirect_suffix);
  }
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    return in_.GetMany(keys);
  }
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override {
    return in_.Scan(begin, end, limit, fn);
  }
  // With the counter, for the same reason as Get: the Get that follows then finds both.
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override {
    if (counter_ || std::none_of(keys.begin(), keys.end(), [](const std::string& k) { return IsLoggedKey(k); })) {
      return in_.Prefetch(keys, prefixes);
    }
    std::vector<std::string> with = keys;
    with.push_back(SeqCounter());
    return in_.Prefetch(with, prefixes);
  }

  // Appends the record, in the inner transaction (nothing when nothing logged was written).
  // own, when given, is told the sequence this attempt takes.
  Status Append(OwnCommits* own) {
    if (writes_.empty()) return Status::OK();
    std::optional<std::string> last;
    if (counter_) {
      last = std::move(*counter_);
    } else {
      ASSIGN_OR_RETURN(last, in_.Get(SeqCounter()));
    }
    ChangeRecord r;
    r.seq = (last ? keys::DecodeU64(*last) : 0) + 1;
    r.time_ns = NowNanos();
    r.writes.assign(writes_.begin(), writes_.end());
    RETURN_IF_ERROR(in_.Put(SeqCounter(), keys::EncodeU64(r.seq)));
    RETURN_IF_ERROR(in_.Put(ChangeRecordKey(r.seq), EncodeChangeRecord(r)));
    last_appended_seq = r.seq;  // a retried attempt sets it again; the committed one is last
    appended_ = r.seq;
    if (own) own->Attempt(r.seq);
    return Status::OK();
  }
  uint64_t appended() const { return appended_; }

 private:
  KvTxn& in_;
  uint64_t appended_ = 0;
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;
  // The counter's value, once read with the first namespace read (nothing else in the
  // transaction writes it before Append).
  std::optional<std::optional<std::string>> counter_;
};

class ChangeLogEngine final : public KvEngine {
 public:
  explicit ChangeLogEngine(std::unique_ptr<KvEngine> inner) : in_(std::move(inner)) {}
  std::string Describe() const override { return in_->Describe(); }
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    if (read_only || UnloggedScope::active()) return in_->Txn(fn, read_only);
    OwnCommits* own = polled_.load() ? &own_ : nullptr;
    std::vector<uint64_t> attempts;
    uint64_t appended = 0;
    Status st = in_->Txn(
        [&](KvTxn& t) -> Status {
          LoggingTxn logged(t);  // one per attempt: a retried callback starts afresh
          appended = 0;
          RETURN_IF_ERROR(fn(logged));
          RETURN_IF_ERROR(logged.Append(own));
          appended = logged.appended();
          if (appended) attempts.push_back(appended);
          return Status::OK();
        },
        false);
    if (own) own->Finish(attempts, st.ok() ? appended : 0);
    return st;
  }
  Status Reset() override { return in_->Reset(); }
  Status Sync() override { return in_->Sync(); }
  Result<DurabilityReport> Durability() override { return in_->Durability(); }
  // The inner engine's push where it has one (etcd, Redis); otherwise the log is polled
  // (meta/change_log_watch.h).
  Status Watch(WatchFn on_change) override {
    std::lock_guard<std::mutex> l(watch_mu_);
    if (!on_change) {
      if (!poller_) return in_->Watch(nullptr);
      poller_.reset();
      polled_.store(false);
      return Status::OK();
    }
    Status st = in_->Watch(on_change);
    if (st.code() != ENOTSUP) return st;
    if (poller_) return Status::Err(EBUSY, "the change log is watched already");
    polled_.store(true);  // before the poller's first read: no own commit goes unnoted
    auto p = ChangeLogPoller::Start(in_.get(), std::move(on_change), &own_);
    if (!p.ok()) {
      polled_.store(false);
      return p.status();
    }
    poller_ = std::move(*p);
    return Status::OK();
  }
  ~ChangeLogEngine() override { (void)Watch(nullptr); }

 private:
  std::unique_ptr<KvEngine> in_;
  std::atomic<bool> polled_{false};
  OwnCommits own_;
  std::mutex watch_mu_;
  std::unique_ptr<ChangeLogPoller> poller_;  // guarded by watch_mu_
};

}  // namespace

UnloggedScope::UnloggedScope() { ++unlogged_depth; }
UnloggedScope::~UnloggedScope() { --unlogged_depth; }
bool UnloggedScope::active() { return unlogged_depth > 0; }

uint64_t LastAppendedSeq() { return last_appended_seq; }
void ResetLastAppendedSeq() { last_appended_seq = 0; }

std::string ChangeSeqKey() { return SeqCounter(); }

Result<uint64_t> ChangeSeqIn(KvTxn& t) {
  ASSIGN_OR_RETURN(auto v, t.Get(SeqCounter()));
  return v ? keys::DecodeU64(*v) : 0;
}

Result<uint64_t> LastChangeSeq(KvEngine* engine) {
  uint64_t last = 0;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        ASSIGN_OR_RETURN(last, ChangeSeqIn(t));
        return Status::OK();
      },
      true));
  return last;
}

std::unique_ptr<KvEngine> WithChangeLog(std::unique_ptr<KvEngine> inner) {
  return std::make_unique<ChangeLogEngine>(std::move(inner));
}

bool IsLoggedKey(std::string_view key) {
  if (key.empty()) return false;
  switch (key[0]) {
    case 'A':  // inode keys, except locks (a session's own)
      return !(key.size() >= 10 && (key[9] == 'F' || key[9] == 'P'));
    case 'K':
    case 'W':
      return true;
    case 'P':
      return key.starts_with("PL") || key.starts_with("PM");
    case 'G':
      return key.starts_with(keys::kGatewayUserPrefix);
    default:
      return false;
  }
}

std::string ChangeRecordKey(uint64_t seq) {
  std::string k(kLogPrefix);
  PutU64(&k, seq);
  return k;
}

std::string EncodeChangeRecord(const ChangeRecord& r) {
  std::string v;
  PutU64(&v, static_cast<uint64_t>(r.time_ns));
  for (const auto& [key, value] : r.writes) {
    PutU8(&v, value ? 'P' : 'D');
    PutStr(&v, key);
    if (value) PutStr(&v, *value);
  }
  return v;
}

Result<ChangeRecord> DecodeChangeRecord(uint64_t seq, std::string_view v) {
  ChangeRecord r;
  r.seq = seq;
  ByteReader in(v);
  r.time_ns = static_cast<int64_t>(in.U64());
  while (in.ok() && !in.empty()) {
    uint8_t op = in.U8();
    std::string key(in.Str());
    if (op == 'P') {
      r.writes.emplace_back(std::move(key), std::string(in.Str()));
    } else if (op == 'D') {
      r.writes.emplace_back(std::move(key), std::nullopt);
    } else {
      return Status::Err(EIO, "change record " + std::to_string(seq) + " is damaged (unknown operation)");
    }
  }
  if (!in.ok()) return Status::Err(EIO, "change record " + std::to_string(seq) + " is damaged (truncated)");
  return r;
}

namespace {

// Decodes the records of key k from `from` on into out, or sets bad (false: stop).
bool Decode(std::string_view k, std::string_view v, uint64_t from, std::vector<ChangeRecord>* out, Status* bad) {
  Status st = DecodeChangeValue(keys::DecodeU64(k.substr(1)), v, from, out);
  if (!st.ok()) {
    *bad = std::move(st);
    return false;
  }
  return true;
}

// Up to `want` records from `from` on, whichever exist (the log's first may be past from).
// in_block, when given, is set to whether the last key read was a block: the records after
// it are likely packed too, and a scan finds them where reading by key does not.
Status ScanBatch(KvEngine* engine, uint64_t from, size_t want, std::vector<ChangeRecord>* batch, Status* bad,
                 bool* in_block) {
  return engine->Txn(
      [&](KvTxn& t) -> Status {
        batch->clear();
        *bad = Status::OK();
        *in_block = false;
        // Each key holds at least one record from `from` on (a block, keyed by its last
        // record, holds many).
        return t.Scan(ChangeRecordKey(from), PrefixEnd(kLogPrefix), want, [&](std::string_view k, std::string_view v) {
          if (k.size() != 9) return true;
          const uint64_t seq = keys::DecodeU64(k.substr(1));
          *in_block = FirstSeqOfValue(seq, v) != seq;
          return Decode(k, v, from, batch, bad) && batch->size() < want;
        });
      },
      true);
}

// Records from..from+n-1 by their keys, in one read (GetMany: one round trip): the prefix
// that exists. A scan of the log's keys would be several reads on Redis, and every commit
// appending a record meanwhile would make it conflict: a reader across a slow link from a
// busy primary would retry forever.
Status GetBatch(KvEngine* engine, uint64_t from, size_t n, std::vector<ChangeRecord>* batch, Status* bad) {
  std::vector<std::string> ks;
  ks.reserve(n);
  for (size_t i = 0; i < n; ++i) ks.push_back(ChangeRecordKey(from + i));
  return engine->Txn(
      [&](KvTxn& t) -> Status {
        batch->clear();
        *bad = Status::OK();
        ASSIGN_OR_RETURN(auto vals, t.GetMany(ks));
        for (size_t i = 0; i < vals.size() && vals[i]; ++i) {
          if (!Decode(ks[i], *vals[i], from + i, batch, bad)) break;
        }
        return Status::OK();
      },
      true);
}

}  // namespace

Result<ChangeLogBounds> ChangeLogRange(KvEngine* engine) {
  // Two reads in two transactions (each atomic alone, so neither conflicts with the
  // commits of a busy volume): a trim in between can only make `first` larger, which a
  // reader finds out anyway (ReadChanges returns what exists).
  ChangeLogBounds b;
  ASSIGN_OR_RETURN(b.last, LastChangeSeq(engine));
  b.first = b.last + 1;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        return t.Scan(ChangeRecordKey(0), PrefixEnd(kLogPrefix), 1, [&](std::string_view k, std::string_view v) {
          if (k.size() == 9) b.first = std::min(FirstSeqOfValue(keys::DecodeU64(k.substr(1)), v), b.last + 1);
          return false;
        });
      },
      true));
  return b;
}

Status ReadChanges(KvEngine* engine, uint64_t from, size_t limit, const std::function<bool(const ChangeRecord&)>& fn,
                   uint64_t* last_out) {
  // Every record up to the counter's value exists unless trimmed (no gaps: change_log.h),
  // so they are read by key; a missing one (trimmed, or a damaged log) sends the reader
  // to a scan for the next that exists.
  ASSIGN_OR_RETURN(const uint64_t last, LastChangeSeq(engine));
  if (last_out) *last_out = last;
  size_t seen = 0;
  bool in_block = false;  // the last batch ended in a block: scan first (packed keys are not found by key)
  while (from <= last) {
    const size_t want = limit ? std::min(kBatch, limit - seen) : kBatch;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(std::min(want, kGetBatch), last - from + 1));
    std::vector<ChangeRecord> batch;
    Status bad;  // a damaged record: the records before it are still handed to fn
    if (!in_block) RETURN_IF_ERROR(GetBatch(engine, from, n, &batch, &bad));
    bool scanned = false;
    if (batch.empty() && bad.ok()) {
      RETURN_IF_ERROR(ScanBatch(engine, from, want, &batch, &bad, &in_block));
      scanned = true;
    }
    // A block may give more than asked for: all of it is handed on, unless past the limit
    // (the rest, and any damage after it, is read again by the next call).
    if (limit && batch.size() > limit - seen) {
      batch.resize(limit - seen);
      bad = Status::OK();
    }
    for (const ChangeRecord& r : batch) {
      if (!fn(r)) return Status::OK();
    }
    if (!bad.ok()) return bad;
    if (batch.empty()) return Status::OK();
    seen += batch.size();
    if (limit && seen >= limit) return Status::OK();
    if (scanned && batch.size() < want) return Status::OK();
    from = batch.back().seq + 1;
  }
  return Status::OK();
}

Result<size_t> ReplaceUnchanged(KvEngine* engine, const std::vector<std::pair<std::string, std::string>>& expect,
                                const std::pair<std::string, std::string>* put) {
  size_t done = 0;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        done = 0;
        std::vector<std::string> ks;
        ks.reserve(expect.size());
        for (const auto& kv : expect) ks.push_back(kv.first);
        ASSIGN_OR_RETURN(auto now, t.GetMany(ks));
        std::vector<bool> same(expect.size());
        size_t n_same = 0;
        for (size_t i = 0; i < expect.size(); ++i) n_same += (same[i] = now[i] && *now[i] == expect[i].second);
        done = n_same;
        if (put && n_same != expect.size()) return Status::OK();  // another client got there first
        for (size_t i = 0; i < expect.size(); ++i) {
          if (same[i] && !(put && expect[i].first == put->first)) RETURN_IF_ERROR(t.Delete(expect[i].first));
        }
        if (put) RETURN_IF_ERROR(t.Put(put->first, put->second));
        return Status::OK();
      },
      false));
  return done;
}

Result<uint64_t> TrimChangeLog(KvEngine* engine, int64_t cutoff_ns, uint64_t keep_from) {
  // Which records may go is found in a read-only transaction; the read-write one then reads
  // only those keys: a scan of the log (or a read of the counter) in it would conflict, on
  // Redis, with every commit appending a record meanwhile, and a busy volume never trimmed.
  uint64_t removed = 0;
  for (int rounds = 0; rounds < 100000; ++rounds) {
    std::vector<std::pair<std::string, std::string>> old;
    RETURN_IF_ERROR(engine->Txn(
        [&](KvTxn& t) -> Status {
          old.clear();
          ASSIGN_OR_RETURN(auto last, t.Get(SeqCounter()));
          // Records appended later have larger sequences: the newest stays whatever comes.
          uint64_t newest = std::min(last ? keys::DecodeU64(*last) : 0, keep_from);
          return t.Scan(ChangeRecordKey(0), PrefixEnd(kLogPrefix), kBatch, [&](std::string_view k, std::string_view v) {
            if (k.size() != 9 || keys::DecodeU64(k.substr(1)) >= newest) return false;
            if (LastTimeOfValue(v) >= cutoff_ns) return false;  // a block: its last record
            old.emplace_back(k, v);
            return true;
          });
        },
        true));
    if (old.empty()) return removed;
    ASSIGN_OR_RETURN(size_t n, ReplaceUnchanged(engine, old, nullptr));
    removed += n;
    if (old.size() < kBatch) return removed;
  }
  return removed;
}

}  // namespace tierfs
