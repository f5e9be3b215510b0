#include "meta/mem_engine.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "meta/txn_nesting.h"

namespace tierfs {

// std::string compares through char_traits<char>, which orders bytes as unsigned char:
// exactly the unsigned byte-string order the KvEngine contract requires.
using KvMap = std::map<std::string, std::string, std::less<>>;

struct MemEngine::State {
  std::mutex mu;
  KvMap data;  // guarded by mu
};

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<MemEngine::State>> states;  // guarded by mu
};

// Never destroyed: engines may still be used by threads while static destructors run.
Registry& GlobalRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

// A transaction over the base map, which the caller keeps locked for the transaction's
// whole life. Writes are buffered (nullopt = delete) and applied by Commit(), so a failed
// callback leaves the base untouched.
class MemTxn final : public KvTxn {
 public:
  MemTxn(const KvMap& base, bool read_only) : base_(base), read_only_(read_only) {}

  Result<std::optional<std::string>> Get(std::string_view key) override {
    auto w = writes_.find(key);
    if (w != writes_.end()) return w->second;
    auto b = base_.find(key);
    if (b != base_.end()) return std::optional<std::string>(b->second);
    return std::optional<std::string>();
  }

  Status Put(std::string_view key, std::string_view value) override {
    RETURN_IF_ERROR(CheckWritable());
    writes_.insert_or_assign(std::string(key), std::optional<std::string>(value));
    return Status::OK();
  }

  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(CheckWritable());
    writes_.insert_or_assign(std::string(key), std::optional<std::string>());
    return Status::OK();
  }

  Status Scan(std::string_view begin, std::string_view end, size_t limit,
              const ScanFn& fn) override {
    // Each step looks the next key up afresh from a cursor instead of holding iterators,
    // so the callback may Put or Delete (even the visited key) without invalidating the
    // scan. Keys written ahead of the cursor by the callback are visited, as in SQLite.
    std::string cursor(begin);
    bool inclusive = true;
    size_t visited = 0;
    while (limit == 0 || visited < limit) {
      std::optional<std::pair<std::string, std::string>> next = NextVisible(cursor, inclusive);
      if (!next) break;
      if (!end.empty() && std::string_view(next->first) >= end) break;
      ++visited;
      if (!fn(next->first, next->second)) break;
      cursor = std::move(next->first);
      inclusive = false;
    }
    return Status::OK();
  }

  const Status& error() const { return error_; }

  void Commit(KvMap& base) {
    for (auto& [key, value] : writes_) {
      if (value) {
        base.insert_or_assign(key, std::move(*value));
      } else {
        base.erase(key);
      }
    }
    writes_.clear();
  }

 private:
  // Sticky, as in the SQLite engine: a read-only transaction that tried to write fails
  // even if the callback ignores the error.
  Status CheckWritable() {
    if (read_only_) {
      error_ =
          Status::Err(EROFS, "write inside a read-only metadata transaction (programming error)");
      return error_;
    }
    return Status::OK();
  }

  // The first live key >= cursor (or > cursor), merging buffered writes over the base.
  // Returns copies because the callback may overwrite buffered values.
  std::optional<std::pair<std::string, std::string>> NextVisible(std::string cursor,
                                                                 bool inclusive) const {
    for (;;) {
      auto b = inclusive ? base_.lower_bound(cursor) : base_.upper_bound(cursor);
      auto w = inclusive ? writes_.lower_bound(cursor) : writes_.upper_bound(cursor);
      bool has_b = b != base_.end();
      bool has_w = w != writes_.end();
      if (!has_b && !has_w) return std::nullopt;
      if (has_w && (!has_b || w->first <= b->first)) {
        if (w->second) return std::make_pair(w->first, *w->second);
        // A buffered delete hides the base entry with the same key; skip past both.
        cursor = w->first;
        inclusive = false;
        continue;
      }
      return std::make_pair(b->first, b->second);
    }
  }

  const KvMap& base_;
  bool read_only_;
  Status error_;
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;
};

}  // namespace

MemEngine::MemEngine(std::string name) : name_(std::move(name)) {
  Registry& registry = GlobalRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto& state = registry.states[name_];
  if (!state) state = std::make_shared<State>();
  state_ = state;
}

MemEngine::~MemEngine() = default;

std::string MemEngine::Describe() const { return "mem://" + name_; }

Status MemEngine::Txn(const std::function<Status(KvTxn&)>& fn, bool read_only) {
  if (TxnNesting::Inside(state_.get())) {
    return Status::Err(EDEADLK, "nested transaction on metadata engine " + Describe() +
                                    " (programming error: it would deadlock)");
  }
  TxnNesting::Mark mark(state_.get());
  std::lock_guard<std::mutex> lock(state_->mu);
  MemTxn txn(state_->data, read_only);
  Status st = fn(txn);
  if (!st.ok()) return st;
  if (!txn.error().ok()) return txn.error();
  if (!read_only) txn.Commit(state_->data);
  return Status::OK();
}

Status MemEngine::Reset() {
  if (TxnNesting::Inside(state_.get())) {
    return Status::Err(EDEADLK, "Reset inside a transaction on metadata engine " + Describe() +
                                    " (programming error: it would deadlock)");
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->data.clear();
  return Status::OK();
}

}  // namespace tierfs
