#include "meta/redis_txn.h"

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "meta/key_schema.h"

namespace tierfs::redis {

namespace {

using Entry = std::pair<std::string, std::string>;

// Scan batch sizes. A batch is one atomic script run; the server serves nobody else
// meanwhile, so batches stay small enough to take a few milliseconds at most. The first
// batch is small because most scans stop early (limit 1, a short directory).
constexpr size_t kFirstBatch = 128;
constexpr size_t kMaxGroupBatch = 4096;
// Cross-group scans (fsck, gc, dump walking every inode) with a limit read it in one batch
// when they can, so that a read-only walk needs no validation and cannot be starved by
// concurrent writers (every commit changes the global version such a scan watches).
constexpr size_t kMaxMultiBatch = 10000;
constexpr size_t kMaxUnlimitedMultiBatch = 1024;

bool IsNoScript(const redisReply* r) { return IsError(r) && Str(r).substr(0, 8) == "NOSCRIPT"; }

std::string Successor(std::string_view key) {
  std::string s(key);
  s.push_back('\0');
  return s;
}

// Whether [begin, end) ("" = unbounded) lies inside one full scan group, the group a
// scan of it reads under the group's version; sets *group then.
bool InOneGroup(std::string_view begin, std::string_view end, std::string_view* group) {
  *group = keys::ScanGroup(begin);
  if (!keys::IsFullScanGroup(*group)) return false;
  std::string group_end = PrefixEnd(*group);
  return group_end.empty() || (!end.empty() && end <= group_end);
}

}  // namespace

// The server's keys in [begin, end), fetched in batches as the scan advances. A range
// inside one full scan group reads that group's index under the group's version; any other
// range reads the groups in order under the global version.
class RedisTxn::ServerRange {
 public:
  ServerRange(RedisTxn& txn, std::string_view begin, std::string_view end, size_t limit)
      : txn_(txn), end_(end), from_(begin) {
    std::string_view group;
    single_ = InOneGroup(begin, end, &group);
    if (single_) group_.assign(group);
    max_batch_ = single_ ? kMaxGroupBatch : (limit > 0 ? kMaxMultiBatch : kMaxUnlimitedMultiBatch);
    batch_ = std::min(limit > 0 ? limit : kFirstBatch, max_batch_);
    // A whole prefix that Prefetch read: its first batch is already here, under its watch.
    auto p = txn_.prefetched_.find(begin);
    if (single_ && p != txn_.prefetched_.end() && end == PrefixEnd(begin)) {
      buf_ = p->second.entries;
      exhausted_ = p->second.complete;
      if (!exhausted_) from_ = Successor(buf_.back().first);
      batch_ = std::min(batch_ * 2, max_batch_);
    }
  }

  // Points *out at the first server entry with key >= cursor (> cursor when !inclusive),
  // or nullptr when there is none in range. The entry stays valid until the next call.
  Status Next(std::string_view cursor, bool inclusive, const Entry** out) {
    for (;;) {
      while (pos_ < buf_.size()) {
        std::string_view k = buf_[pos_].first;
        if (k < cursor || (!inclusive && k == cursor)) {
          ++pos_;
          continue;
        }
        *out = &buf_[pos_];
        return Status::OK();
      }
      if (exhausted_) {
        *out = nullptr;
        return Status::OK();
      }
      // Skip server keys the cursor already passed (buffered writes may run ahead).
      if (from_ < cursor) from_.assign(cursor);
      RETURN_IF_ERROR(single_ ? FetchGroup() : FetchMulti());
      batch_ = std::min(batch_ * 2, max_batch_);
    }
  }

 private:
  Status FetchGroup() {
    std::vector<Cmd> cmds;
    txn_.AddWatch(&cmds, "v", group_);
    cmds.push_back(std::move(Cmd("EVALSHA")
                                 .Arg(txn_.conn_.shas().scan_group)
                                 .Arg(0LL)
                                 .ArgRef(group_)
                                 .ArgRef(from_)
                                 .ArgRef(end_)
                                 .Arg(end_.empty() ? "0" : "1")
                                 .Arg(static_cast<long long>(batch_))));
    std::vector<Reply> replies;
    RETURN_IF_ERROR(txn_.Exchange(cmds, &replies));
    ++txn_.reads_;
    const redisReply* r = replies.back().get();
    RETURN_IF_ERROR(txn_.Expect(r, "scanning keys"));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_ARRAY) {
      return txn_.Expect(nullptr, "scanning keys");
    }
    buf_.clear();
    pos_ = 0;
    const redisReply* kv = r->element[2];
    for (size_t i = 0; i + 1 < kv->elements; i += 2) {
      buf_.emplace_back(std::string(Str(kv->element[i])), std::string(Str(kv->element[i + 1])));
    }
    if (static_cast<size_t>(r->element[0]->integer) < batch_) {
      exhausted_ = true;
    } else {
      from_ = Successor(Str(r->element[1]));
    }
    return Status::OK();
  }

  Status FetchMulti() {
    std::vector<Cmd> cmds;
    txn_.AddWatch(&cmds, "W", "");
    cmds.push_back(std::move(Cmd("EVALSHA")
                                 .Arg(txn_.conn_.shas().scan_multi)
                                 .Arg(0LL)
                                 .ArgRef(from_)
                                 .ArgRef(end_)
                                 .Arg(end_.empty() ? "0" : "1")
                                 .Arg(static_cast<long long>(batch_))
                                 .Arg(static_cast<long long>(keys::kMaxScanGroupLength))));
    std::vector<Reply> replies;
    RETURN_IF_ERROR(txn_.Exchange(cmds, &replies));
    ++txn_.reads_;
    const redisReply* r = replies.back().get();
    RETURN_IF_ERROR(txn_.Expect(r, "scanning keys across groups"));
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_ARRAY) {
      return txn_.Expect(nullptr, "scanning keys across groups");
    }
    // Everything below the horizon was read; keys at or above it wait for the next batch.
    std::optional<std::string> horizon;
    auto lower = [&](std::string h) {
      if (!horizon || h < *horizon) horizon = std::move(h);
    };
    if (r->element[1]->integer == 1) lower(std::string(Str(r->element[0])));
    buf_.clear();
    pos_ = 0;
    const redisReply* groups = r->element[2];
    for (size_t g = 0; g < groups->elements; ++g) {
      const redisReply* e = groups->element[g];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) {
        return txn_.Expect(nullptr, "scanning keys across groups");
      }
      if (e->element[1]->type == REDIS_REPLY_INTEGER && e->element[1]->integer == 1) {
        lower(Successor(Str(e->element[2])));
      }
      const redisReply* kv = e->element[3];
      for (size_t i = 0; i + 1 < kv->elements; i += 2) {
        buf_.emplace_back(std::string(Str(kv->element[i])), std::string(Str(kv->element[i + 1])));
      }
    }
    // Groups interleave only when one is a prefix of another (keys shorter than their
    // natural group); sorting makes the merge exact either way.
    std::sort(buf_.begin(), buf_.end());
    if (horizon) {
      auto cut = std::lower_bound(buf_.begin(), buf_.end(), *horizon,
                                  [](const Entry& a, const std::string& h) { return a.first < h; });
      buf_.erase(cut, buf_.end());
      from_ = std::move(*horizon);
    } else {
      exhausted_ = true;
    }
    return Status::OK();
  }

  RedisTxn& txn_;
  const std::string end_;  // "" = unbounded
  std::string from_;       // the next batch starts here (inclusive)
  bool single_ = false;
  std::string group_;
  bool exhausted_ = false;
  std::vector<Entry> buf_;
  size_t pos_ = 0;
  size_t batch_ = kFirstBatch;
  size_t max_batch_ = kMaxGroupBatch;
};

Status RedisTxn::Exchange(const std::vector<Cmd>& cmds, std::vector<Reply>* replies) {
  if (!unavailable_.ok()) return unavailable_;
  Status st = conn_.Exchange(cmds, replies);
  if (!st.ok()) unavailable_ = st;
  return st;
}

Status RedisTxn::Expect(const redisReply* r, std::string_view what) {
  if (r != nullptr && !IsError(r)) return Status::OK();
  Status st = ReplyStatus(r, where_, what);
  if (IsNoScript(r)) {
    // Someone flushed the server's script cache: load the scripts again and retry.
    Status reload = conn_.ReloadScripts();
    if (!reload.ok()) st = reload;
    if (unavailable_.ok()) unavailable_ = Status::Err(EAGAIN, st.message());
  } else if (st.code() == EAGAIN) {
    if (unavailable_.ok()) unavailable_ = st;
  } else if (error_.ok()) {
    error_ = st;
  }
  return st;
}

void RedisTxn::AddWatch(std::vector<Cmd>* cmds, std::string_view prefix, std::string_view name) {
  std::string key(prefix);
  key.append(name);
  if (!watched_.insert(key).second) return;
  cmds->push_back(std::move(Cmd("WATCH").Arg(key)));
  watching_ = true;
}

Status RedisTxn::CheckWritable() {
  if (!unavailable_.ok()) return unavailable_;
  if (read_only_) {
    if (error_.ok()) {
      error_ =
          Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)");
    }
    return error_;
  }
  return Status::OK();
}

Result<std::optional<std::string>> RedisTxn::Get(std::string_view key) {
  if (!unavailable_.ok()) return unavailable_;
  if (auto w = writes_.find(key); w != writes_.end()) return w->second;
  if (auto c = read_cache_.find(key); c != read_cache_.end()) return c->second;
  std::vector<Cmd> cmds;
  AddWatch(&cmds, "k", key);
  cmds.push_back(std::move(Cmd("GET").Arg("k", key)));
  std::vector<Reply> replies;
  RETURN_IF_ERROR(Exchange(cmds, &replies));
  ++reads_;
  for (const Reply& r : replies) RETURN_IF_ERROR(Expect(r.get(), "reading a key"));
  const redisReply* r = replies.back().get();
  std::optional<std::string> value;
  if (r->type == REDIS_REPLY_STRING) {
    value.emplace(r->str, r->len);
  } else if (r->type != REDIS_REPLY_NIL) {
    return Expect(nullptr, "reading a key");
  }
  read_cache_.emplace(std::string(key), value);
  return value;
}

Result<std::vector<std::optional<std::string>>> RedisTxn::GetMany(const std::vector<std::string>& keys) {
  if (!unavailable_.ok()) return unavailable_;
  std::vector<std::optional<std::string>> out(keys.size());
  // Keys neither written nor read before are asked in one pipeline (WATCH, as Get does, then
  // GET), kGetManyBatch keys a round trip so that one exchange's replies stay small.
  constexpr size_t kGetManyBatch = 512;
  std::vector<size_t> asked;
  std::vector<Cmd> cmds;
  std::vector<size_t> get_reply;  // index of each asked key's GET in the replies
  auto flush = [&]() -> Status {
    if (asked.empty()) return Status::OK();
    std::vector<Reply> replies;
    RETURN_IF_ERROR(Exchange(cmds, &replies));
    ++reads_;
    for (const Reply& r : replies) RETURN_IF_ERROR(Expect(r.get(), "reading keys"));
    for (size_t j = 0; j < asked.size(); ++j) {
      const redisReply* r = replies[get_reply[j]].get();
      std::optional<std::string> value;
      if (r->type == REDIS_REPLY_STRING) {
        value.emplace(r->str, r->len);
      } else if (r->type != REDIS_REPLY_NIL) {
        return Expect(nullptr, "reading keys");
      }
      read_cache_.emplace(keys[asked[j]], value);
      out[asked[j]] = std::move(value);
    }
    asked.clear();
    cmds.clear();
    get_reply.clear();
    return Status::OK();
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    if (auto w = writes_.find(key); w != writes_.end()) {
      out[i] = w->second;
      continue;
    }
    if (auto c = read_cache_.find(key); c != read_cache_.end()) {
      out[i] = c->second;
      continue;
    }
    AddWatch(&cmds, "k", key);
    get_reply.push_back(cmds.size());
    cmds.push_back(std::move(Cmd("GET").Arg("k", key)));
    asked.push_back(i);
    if (asked.size() == kGetManyBatch) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  return out;
}

Result<std::vector<std::optional<std::string>>> RedisTxn::GetIndirect(const std::vector<std::string>& direct,
                                                                      std::string_view indirect_prefix, size_t n,
                                                                      std::string_view indirect_suffix) {
  if (!read_only_ || reads_ > 0 || !writes_.empty() || direct.empty()) {
    return KvTxn::GetIndirect(direct, indirect_prefix, n, indirect_suffix);
  }
  if (!unavailable_.ok()) return unavailable_;
  Cmd script("EVALSHA");
  script.Arg(conn_.shas().get_indirect).Arg(0LL).Arg(static_cast<long long>(n)).Arg(indirect_prefix).Arg(indirect_suffix);
  for (const auto& k : direct) script.Arg("k", k);
  std::vector<Cmd> cmds;
  // The indirect key is known only once the script ran, too late to watch it; the global
  // version stands for all of them, so that a transaction that reads more afterwards is
  // validated against every commit in between (a lookup that stops here needs none).
  AddWatch(&cmds, "W", "");
  cmds.push_back(std::move(script));
  std::vector<Reply> replies;
  RETURN_IF_ERROR(Exchange(cmds, &replies));
  ++reads_;
  for (const Reply& each : replies) RETURN_IF_ERROR(Expect(each.get(), "reading keys"));
  const redisReply* r = replies.back().get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements != direct.size() + 1) return Expect(nullptr, "reading keys");
  std::vector<std::optional<std::string>> out;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type == REDIS_REPLY_STRING) {
      out.emplace_back(std::string(e->str, e->len));
    } else if (e->type == REDIS_REPLY_NIL) {
      out.emplace_back();
    } else {
      return Expect(nullptr, "reading keys");
    }
  }
  return out;
}

Status RedisTxn::Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) {
  if (!unavailable_.ok()) return unavailable_;
  std::vector<const std::string*> ks, ps;
  std::vector<std::string> ends;
  for (const auto& k : keys) {
    if (!writes_.count(k) && !read_cache_.count(k)) ks.push_back(&k);
  }
  for (const auto& p : prefixes) {
    std::string_view group;
    std::string end = PrefixEnd(p);
    bool single = !end.empty() && InOneGroup(p, end, &group);
    // A prefix with buffered writes is merged by the scan itself; nothing gained here.
    auto w = writes_.lower_bound(p);
    bool written = w != writes_.end() && w->first < end;
    if (single && !written && !prefetched_.count(p)) {
      ps.push_back(&p);
      ends.push_back(std::move(end));
    }
  }
  if (ks.empty() && ps.empty()) return Status::OK();
  std::vector<Cmd> cmds;
  for (const std::string* k : ks) AddWatch(&cmds, "k", *k);
  for (const std::string* p : ps) AddWatch(&cmds, "v", keys::ScanGroup(*p));
  Cmd script("EVALSHA");
  script.Arg(conn_.shas().prefetch).Arg(0LL).Arg(static_cast<long long>(ks.size()));
  script.Arg(static_cast<long long>(ps.size())).Arg(static_cast<long long>(kFirstBatch));
  for (const std::string* k : ks) script.ArgRef(*k);
  for (size_t i = 0; i < ps.size(); ++i) script.Arg(keys::ScanGroup(*ps[i])).ArgRef(*ps[i]).ArgRef(ends[i]);
  cmds.push_back(std::move(script));
  std::vector<Reply> replies;
  RETURN_IF_ERROR(Exchange(cmds, &replies));
  ++reads_;
  for (const Reply& r : replies) RETURN_IF_ERROR(Expect(r.get(), "reading keys"));
  const redisReply* r = replies.back().get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements != ks.size() + ps.size()) return Expect(nullptr, "reading keys");
  for (size_t i = 0; i < ks.size(); ++i) {
    const redisReply* e = r->element[i];
    std::optional<std::string> value;
    if (e->type == REDIS_REPLY_STRING) {
      value.emplace(e->str, e->len);
    } else if (e->type != REDIS_REPLY_NIL) {
      return Expect(nullptr, "reading keys");
    }
    read_cache_.emplace(*ks[i], std::move(value));
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    const redisReply* e = r->element[ks.size() + i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY) {
      return Expect(nullptr, "scanning keys");
    }
    Prefetched got;
    const redisReply* kv = e->element[2];
    for (size_t j = 0; j + 1 < kv->elements; j += 2) {
      got.entries.emplace_back(std::string(Str(kv->element[j])), std::string(Str(kv->element[j + 1])));
    }
    got.complete = static_cast<size_t>(e->element[0]->integer) < kFirstBatch;
    prefetched_.emplace(*ps[i], std::move(got));
  }
  return Status::OK();
}

Status RedisTxn::Put(std::string_view key, std::string_view value) {
  RETURN_IF_ERROR(CheckWritable());
  writes_.insert_or_assign(std::string(key), std::optional<std::string>(value));
  return Status::OK();
}

Status RedisTxn::Delete(std::string_view key) {
  RETURN_IF_ERROR(CheckWritable());
  writes_.insert_or_assign(std::string(key), std::optional<std::string>());
  return Status::OK();
}

Status RedisTxn::Scan(std::string_view begin, std::string_view end, size_t limit,
                      const ScanFn& fn) {
  if (!unavailable_.ok()) return unavailable_;
  if (!end.empty() && begin >= end) return Status::OK();
  ServerRange server(*this, begin, end, limit);
  // Each step looks the next key up afresh from the cursor, in the server's batch and in
  // the buffered writes, so the callback may write anywhere (even the visited key). Keys
  // the callback writes ahead of the cursor are visited, as in the other engines.
  std::string cursor(begin);
  bool inclusive = true;
  size_t visited = 0;
  while (limit == 0 || visited < limit) {
    const Entry* s = nullptr;
    RETURN_IF_ERROR(server.Next(cursor, inclusive, &s));
    auto w = inclusive ? writes_.lower_bound(cursor) : writes_.upper_bound(cursor);
    bool has_w = w != writes_.end() && (end.empty() || std::string_view(w->first) < end);
    if (s == nullptr && !has_w) break;
    std::string key, value;
    if (has_w && (s == nullptr || w->first <= s->first)) {
      key = w->first;
      if (!w->second) {  // a buffered delete hides the server's key of the same name
        cursor = std::move(key);
        inclusive = false;
        continue;
      }
      value = *w->second;
    } else {
      key = s->first;
      value = s->second;
    }
    ++visited;
    // Copies: the callback may overwrite the buffered value or make the range refetch.
    if (!fn(key, value)) break;
    if (!unavailable_.ok()) return unavailable_;  // a Get inside the callback failed
    cursor = std::move(key);
    inclusive = false;
  }
  return Status::OK();
}

Finish RedisTxn::Exec(std::vector<Cmd> cmds, bool commits, int wait_replicas, long long wait_ms) {
  cmds.emplace_back("EXEC");
  if (wait_replicas > 0) cmds.push_back(std::move(Cmd("WAIT").Arg(wait_replicas).Arg(wait_ms)));
  std::vector<Reply> replies;
  Status st = Exchange(cmds, &replies);
  if (!st.ok()) return {commits ? Outcome::kAmbiguous : Outcome::kRetry, st};
  watching_ = false;  // EXEC ends every WATCH, whatever its outcome
  long long replicas = -1;
  if (wait_replicas > 0) {
    const redisReply* w = replies.back().get();
    replicas = w->type == REDIS_REPLY_INTEGER ? w->integer : 0;
    replies.pop_back();
  }
  const redisReply* exec = replies.back().get();
  if (exec->type == REDIS_REPLY_NIL) return {Outcome::kConflict, Status::OK()};
  if (IsError(exec)) {
    // EXECABORT: a queued command was refused; its own reply says why.
    for (const Reply& r : replies) {
      if (IsError(r.get()) && r.get() != exec) exec = r.get();
    }
    Status why = conn_.FollowFailover(ReplyStatus(exec, where_, "committing"));
    return {why.code() == EAGAIN ? Outcome::kRetry : Outcome::kFailed, why};
  }
  if (exec->type != REDIS_REPLY_ARRAY) {
    return {Outcome::kFailed, ReplyStatus(nullptr, where_, "committing")};
  }
  if (!commits) return {Outcome::kOk, Status::OK()};
  const redisReply* result = exec->elements == 1 ? exec->element[0] : nullptr;
  if (IsNoScript(result)) {
    // Someone flushed the server's script cache: load the scripts again and retry.
    Status reload = conn_.ReloadScripts();
    return {Outcome::kRetry, reload.ok() ? ReplyStatus(result, where_, "committing") : reload};
  }
  if (result == nullptr || IsError(result)) {
    Status why = conn_.FollowFailover(ReplyStatus(result, where_, "committing"));
    return {why.code() == EAGAIN ? Outcome::kRetry : Outcome::kFailed, why};
  }
  if (result->type != REDIS_REPLY_INTEGER || result->integer != 1) {
    return {Outcome::kFailed,
            Status::Err(
                EIO, "Redis at " + where_ + ": the commit script refused a fresh commit marker")};
  }
  return {Outcome::kOk, Status::OK(), replicas};
}

Finish RedisTxn::Validate() {
  if (!unavailable_.ok()) return {Outcome::kRetry, unavailable_};
  std::vector<Cmd> cmds;
  cmds.emplace_back("MULTI");
  return Exec(std::move(cmds), /*commits=*/false);
}

Finish RedisTxn::Commit(const std::string& marker, long long marker_ttl_ms, const std::string& channel,
                        int wait_replicas, long long wait_ms) {
  if (!unavailable_.ok()) return {Outcome::kRetry, unavailable_};
  size_t puts = 0;
  for (const auto& [k, v] : writes_) puts += v.has_value();
  Cmd script("EVALSHA");
  script.Arg(conn_.shas().commit).Arg(0LL).ArgRef(marker).Arg(marker_ttl_ms).ArgRef(channel);
  script.Arg(static_cast<long long>(puts)).Arg(static_cast<long long>(writes_.size() - puts));
  for (const auto& [k, v] : writes_) {
    if (!v) continue;
    script.ArgRef(k).Arg(static_cast<long long>(keys::ScanGroup(k).size())).ArgRef(*v);
  }
  for (const auto& [k, v] : writes_) {
    if (v) continue;
    script.ArgRef(k).Arg(static_cast<long long>(keys::ScanGroup(k).size()));
  }
  std::vector<Cmd> cmds;
  cmds.emplace_back("MULTI");
  cmds.push_back(std::move(script));
  return Exec(std::move(cmds), /*commits=*/true, wait_replicas, wait_ms);
}

}  // namespace tierfs::redis
