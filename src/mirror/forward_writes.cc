#include "mirror/forward_writes.h"

#include <atomic>
#include <string>

#include "meta/change_log.h"
#include "meta/key_schema.h"
#include "meta/mirror_state.h"

namespace tierfs::mirror {
namespace {

constexpr int kDiverted = ECHILD;  // a read the mirror cannot answer: never returned to callers

// Passes every call to the transaction it wraps; the wrappers below change a few.
class PassThrough : public KvTxn {
 public:
  explicit PassThrough(KvTxn& in) : in_(in) {}
  Result<std::optional<std::string>> Get(std::string_view key) override { return in_.Get(key); }
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    return in_.GetMany(keys);
  }
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view indirect_prefix, size_t n,
                                                              std::string_view indirect_suffix) override {
    return in_.GetIndirect(direct, indirect_prefix, n, indirect_suffix);
  }
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override {
    return in_.Scan(begin, end, limit, fn);
  }
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override {
    return in_.Prefetch(keys, prefixes);
  }
  Status Put(std::string_view key, std::string_view value) override { return in_.Put(key, value); }
  Status Delete(std::string_view key) override { return in_.Delete(key); }

 protected:
  KvTxn& in_;
};

// A mirror transaction that stops at the first read of a key the mirror does not hold.
class MirrorReads final : public KvTxn {
 public:
  MirrorReads(KvTxn& in, bool* diverted) : in_(in), diverted_(diverted) {}
  Result<std::optional<std::string>> Get(std::string_view key) override {
    if (!MirrorHolds(key)) return Divert();
    return in_.Get(key);
  }
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (!MirrorHolds(k)) return Divert();
    }
    return in_.GetMany(keys);
  }
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view indirect_prefix, size_t n,
                                                              std::string_view indirect_suffix) override {
    for (const auto& k : direct) {
      if (!MirrorHolds(k)) return Divert();
    }
    if (!MirrorHolds(std::string(indirect_prefix) + std::string(8, '\0') + std::string(indirect_suffix))) {
      return Divert();
    }
    return in_.GetIndirect(direct, indirect_prefix, n, indirect_suffix);
  }
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override {
    if (!MirrorHoldsRange(begin, end)) return Divert();
    return in_.Scan(begin, end, limit, fn);
  }
  // Only a hint: forwarded when the mirror holds all of it, else the reads decide.
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override {
    for (const auto& k : keys) {
      if (!MirrorHolds(k)) return Status::OK();
    }
    for (const auto& p : prefixes) {
      if (!MirrorHoldsRange(p, PrefixEnd(p))) return Status::OK();
    }
    return in_.Prefetch(keys, prefixes);
  }
  Status Put(std::string_view, std::string_view) override { return ReadOnly(); }
  Status Delete(std::string_view) override { return ReadOnly(); }

 private:
  Status Divert() {
    *diverted_ = true;
    return Status::Err(kDiverted, "read of a key the mirror does not hold: runs on the primary");
  }
  static Status ReadOnly() {
    return Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)");
  }
  KvTxn& in_;
  bool* diverted_;
};

// A primary transaction of a mirror's client: everything but the keys that are the mirror's
// own business or the primary's identity.
class PrimaryWrites final : public PassThrough {
 public:
  explicit PrimaryWrites(KvTxn& in) : PassThrough(in) {}
  Status Put(std::string_view key, std::string_view value) override {
    RETURN_IF_ERROR(Allowed(key));
    return in_.Put(key, value);
  }
  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(Allowed(key));
    return in_.Delete(key);
  }

 private:
  static Status Allowed(std::string_view key) {
    if (key == keys::Format() || key == MirrorStateKey() || key == MirrorLeaseKey()) {
      return Status::Err(EPERM, "a mirror's client does not change the primary's format record or a mirror's state "
                                "(run `tierfs config` against the primary)");
    }
    return Status::OK();
  }
};

// A read-only primary transaction that reads the change log's counter with its first read,
// in the same round trip (GetMany: one on Redis and PostgreSQL), as the change log's own
// transactions do: a read diverted to the primary pays the link once less.
class PrimaryReads final : public PassThrough {
 public:
  explicit PrimaryReads(KvTxn& in) : PassThrough(in) {}
  Result<std::optional<std::string>> Get(std::string_view key) override {
    if (counter_) return in_.Get(key);
    ASSIGN_OR_RETURN(auto both, in_.GetMany({std::string(key), ChangeSeqKey()}));
    counter_ = std::move(both[1]);
    return std::move(both[0]);
  }
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override {
    if (counter_) return in_.GetMany(keys);
    std::vector<std::string> with(keys);
    with.push_back(ChangeSeqKey());
    ASSIGN_OR_RETURN(auto vals, in_.GetMany(with));
    counter_ = std::move(vals.back());
    vals.pop_back();
    return vals;
  }
  // The counter as read with the first read, or now.
  Result<uint64_t> Seq() {
    if (!counter_) return ChangeSeqIn(in_);
    return *counter_ ? keys::DecodeU64(**counter_) : 0;
  }

 private:
  std::optional<std::optional<std::string>> counter_;
};

class ForwardingEngine final : public KvEngine {
 public:
  ForwardingEngine(std::unique_ptr<KvEngine> mirror, std::unique_ptr<KvEngine> primary)
      : mirror_(std::move(mirror)), primary_(std::move(primary)) {}

  std::string Describe() const override { return mirror_->Describe() + " (writing to " + primary_->Describe() + ")"; }

  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) override {
    if (!read_only) {
      ResetLastAppendedSeq();
      Status st = primary_->Txn(
          [&](KvTxn& t) {
            PrimaryWrites w(t);
            return fn(w);
          },
          false);
      if (st.ok()) {
        Raise(&need_, LastAppendedSeq());
      } else {
        // A refused write saw the primary's state (the name it found taken): this client's
        // reads must not go back to before it.
        uint64_t seen = 0;
        if (primary_->Txn([&](KvTxn& t) -> Status {
                      ASSIGN_OR_RETURN(seen, ChangeSeqIn(t));
                      return Status::OK();
                    },
                    true)
                .ok()) {
          Raise(&need_, seen);
        }
      }
      return st;
    }
    const uint64_t need = need_.load();
    bool diverted = false;
    Status st = mirror_->Txn(
        [&](KvTxn& t) -> Status {
          diverted = false;
          if (held_.load() < need) {
            // The mirror's state, in this transaction: what the keys read below show.
            ASSIGN_OR_RETURN(auto ms, ReadMirrorState(t));
            const uint64_t applied = ms && !ms->seeding ? ms->applied : 0;
            if (applied < need) {
              diverted = true;
              return Status::Err(kDiverted, "the mirror is behind this client");
            }
            Raise(&held_, applied);
          }
          MirrorReads r(t, &diverted);
          Status s = fn(r);
          return diverted ? Status::Err(kDiverted, "diverted") : s;
        },
        true);
    if (!diverted) return st;
    uint64_t seen = 0;
    st = primary_->Txn(
        [&](KvTxn& t) -> Status {
          PrimaryReads r(t);
          RETURN_IF_ERROR(fn(r));
          ASSIGN_OR_RETURN(seen, r.Seq());
          return Status::OK();
        },
        true);
    if (st.ok()) Raise(&need_, seen);
    return st;
  }

  Status Reset() override {
    return Status::Err(EPERM, "a mirror's client does not reset the primary's metadata engine");
  }
  Status Sync() override { return primary_->Sync(); }
  // A commit is kept where it is written: by the primary.
  Result<DurabilityReport> Durability() override { return primary_->Durability(); }

 private:
  static void Raise(std::atomic<uint64_t>* a, uint64_t v) {
    uint64_t cur = a->load();
    while (cur < v && !a->compare_exchange_weak(cur, v)) {
    }
  }

  std::unique_ptr<KvEngine> mirror_, primary_;
  // The newest primary commit this client wrote or saw; the newest the mirror was seen to hold.
  std::atomic<uint64_t> need_{0}, held_{0};
};

}  // namespace

std::unique_ptr<KvEngine> ForwardWrites(std::unique_ptr<KvEngine> mirror, std::unique_ptr<KvEngine> primary) {
  return std::make_unique<ForwardingEngine>(std::move(mirror), std::move(primary));
}

bool MirrorHolds(std::string_view key) {
  return IsLoggedKey(key) || key == keys::Format() || key == MirrorStateKey();
}

bool MirrorHoldsRange(std::string_view begin, std::string_view end) {
  if (begin.empty() || end.empty() || !IsLoggedKey(begin)) return false;
  std::string_view kind;
  switch (begin[0]) {
    case 'A':  // one kind of key of one inode ("A" ino kind): a range of all of an inode's has its locks
      if (begin.size() < 10) return false;
      kind = begin.substr(0, 10);
      break;
    case 'P':
    case 'G':
      kind = begin.substr(0, 2);
      break;
    default:
      kind = begin.substr(0, 1);
  }
  return end <= PrefixEnd(kind);
}

}  // namespace tierfs::mirror
