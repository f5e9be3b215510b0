#include "meta/etcd_txn.h"

#include <algorithm>
#include <cerrno>

namespace tierfs::etcd {

namespace {

constexpr int64_t kScanBatch = 512;
// Compares the commit adds of its own: the commit marker (etcd_engine.cc), and a spare.
constexpr size_t kCommitCompares = 2;

}  // namespace

EtcdTxn::EtcdTxn(Client& client, const Options& options, bool read_only)
    : c_(client), o_(options), read_only_(read_only) {}

std::string EtcdTxn::ValueKey(const Options& o, std::string_view key) {
  std::string k = o.prefix;
  k.push_back('k');
  k.append(key);
  return k;
}

std::string EtcdTxn::VersionKey(const Options& o) { return o.prefix + "W"; }

Status EtcdTxn::Fail(Status st) {
  if (error_.ok()) error_ = st;
  return st;
}

std::optional<std::string> EtcdTxn::Remember(const std::string& key, const Kv* kv) {
  mods_[ValueKey(o_, key)] = kv ? kv->mod_revision : 0;
  std::optional<std::string> v;
  if (kv) v = kv->value;
  read_[key] = v;
  return v;
}

Result<std::optional<std::string>> EtcdTxn::Get(std::string_view key) {
  if (!error_.ok()) return error_;
  if (auto w = writes_.find(key); w != writes_.end()) return w->second;
  if (auto r = read_.find(key); r != read_.end()) return r->second;
  Op range;
  range.key = ValueKey(o_, key);
  range.revision = rev_;
  auto reply = c_.Range(range, rev_ != 0);
  if (!reply.ok()) return Fail(reply.status());
  Snapshot(reply->revision);
  return Remember(std::string(key), reply->kvs.empty() ? nullptr : &reply->kvs[0]);
}

Status EtcdTxn::Put(std::string_view key, std::string_view value) {
  if (read_only_) return Fail(Status::Err(EROFS, "a write in a read-only transaction of " + c_.describe()));
  writes_[std::string(key)] = std::string(value);
  return Status::OK();
}

Status EtcdTxn::Delete(std::string_view key) {
  if (read_only_) return Fail(Status::Err(EROFS, "a delete in a read-only transaction of " + c_.describe()));
  writes_[std::string(key)] = std::nullopt;
  return Status::OK();
}

Result<std::vector<std::optional<std::string>>> EtcdTxn::GetMany(const std::vector<std::string>& keys) {
  if (!error_.ok()) return error_;
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (writes_.count(k) || read_.count(k)) continue;
    missing.push_back(k);
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  const size_t per_txn = std::max<size_t>(1, o_.max_txn_ops);
  for (size_t at = 0; at < missing.size(); at += per_txn) {
    std::vector<Op> ops;
    for (size_t i = at; i < std::min(missing.size(), at + per_txn); ++i) {
      Op r;
      r.key = ValueKey(o_, missing[i]);
      r.revision = rev_;
      ops.push_back(std::move(r));
    }
    auto reply = c_.Txn({}, ops, {}, nullptr, rev_ != 0);
    if (!reply.ok()) return Fail(reply.status());
    if (reply->ranges.size() != ops.size()) {
      return Fail(Status::Err(EIO, "etcd " + c_.describe() + ": a read of " + std::to_string(ops.size()) +
                                       " keys answered " + std::to_string(reply->ranges.size())));
    }
    Snapshot(reply->revision);
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& kvs = reply->ranges[i].kvs;
      Remember(missing[at + i], kvs.empty() ? nullptr : &kvs[0]);
    }
  }
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    auto w = writes_.find(k);
    out.push_back(w != writes_.end() ? w->second : read_[k]);
  }
  return out;
}

Status EtcdTxn::Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) {
  if (!error_.ok()) return error_;
  const size_t strip = o_.prefix.size() + 1;  // "PREFIX/" "k"
  const std::string range_end = end.empty() ? PrefixEnd(o_.prefix + "k") : ValueKey(o_, end);
  const std::string range_begin = ValueKey(o_, begin);
  // In TierFS keys: the batch's span is [cursor, upper), upper unbounded when unset.
  std::string cursor(begin);
  size_t visited = 0;
  for (;;) {
    Op range;
    range.key = ValueKey(o_, cursor);
    range.range_end = range_end;
    range.revision = rev_;
    range.limit = kScanBatch;
    auto reply = c_.Range(range, rev_ != 0);
    if (!reply.ok()) return Fail(reply.status());
    Snapshot(reply->revision);
    std::optional<std::string> upper;
    if (reply->more && !reply->kvs.empty()) {
      upper = reply->kvs.back().key.substr(strip) + std::string(1, '\0');
    } else if (!end.empty()) {
      upper = std::string(end);
    }
    auto in_span = [&](const std::string& k) { return !upper || k < *upper; };
    // The batch merged with the buffered writes of its span, in key order; mod -1: a key
    // only this transaction wrote.
    struct Row {
      std::string key, value;
      int64_t mod;
    };
    std::vector<Row> rows;
    auto w = writes_.lower_bound(cursor);
    auto flush_writes_below = [&](const std::string* k) {
      for (; w != writes_.end() && (!k || w->first < *k) && in_span(w->first); ++w) {
        if (w->second) rows.push_back(Row{w->first, *w->second, -1});
      }
    };
    for (const auto& kv : reply->kvs) {
      std::string k = kv.key.substr(strip);
      flush_writes_below(&k);
      if (w != writes_.end() && w->first == k) {
        if (w->second) {
          rows.push_back(Row{k, *w->second, kv.mod_revision});
        } else {
          mods_[kv.key] = kv.mod_revision;  // deleted here: it must still be as read at commit
        }
        ++w;
        continue;
      }
      rows.push_back(Row{std::move(k), kv.value, kv.mod_revision});
    }
    flush_writes_below(nullptr);
    for (const auto& row : rows) {
      if (row.mod >= 0) {
        mods_[ValueKey(o_, row.key)] = row.mod;
        if (!writes_.count(row.key)) read_[row.key] = row.value;
      }
      ++visited;
      if (!fn(row.key, row.value) || (limit && visited >= limit)) {
        // Validated up to the key it stopped at.
        ranges_.emplace_back(range_begin, ValueKey(o_, row.key) + std::string(1, '\0'));
        return Status::OK();
      }
    }
    if (!reply->more || reply->kvs.empty()) break;
    cursor = *upper;
  }
  ranges_.emplace_back(range_begin, range_end);
  return Status::OK();
}

std::vector<Compare> EtcdTxn::Compares() const {
  std::vector<Compare> out;
  if (rev_ == 0) return out;  // read nothing: a blind write
  if (mods_.size() + ranges_.size() + kCommitCompares > o_.max_txn_ops) {
    out.push_back(Compare{VersionKey(o_), "", true, rev_ + 1});
    return out;
  }
  for (const auto& [k, mod] : mods_) out.push_back(Compare{k, "", false, mod});
  for (const auto& [b, e] : ranges_) out.push_back(Compare{b, e, true, rev_ + 1});
  return out;
}

std::vector<Op> EtcdTxn::WriteOps() const {
  std::vector<Op> out;
  out.reserve(writes_.size() + 1);
  for (const auto& [k, v] : writes_) {
    Op op;
    op.kind = v ? Op::kPut : Op::kDelete;
    op.key = ValueKey(o_, k);
    if (v) op.value = *v;
    out.push_back(std::move(op));
  }
  Op version;
  version.kind = Op::kPut;
  version.key = VersionKey(o_);
  out.push_back(std::move(version));
  return out;
}

}  // namespace tierfs::etcd
