// In-memory metadata engine ("mem://NAME"), for tests and throwaway volumes.
//
// All MemEngine objects opened with the same NAME in one process share one ordered map,
// so two Meta objects in a test behave like two clients of one volume. The shared map
// lives until the process exits (closing every engine does not erase it), so a test can
// "format" with one engine and "mount" with a later one; Reset() empties it.
#pragma once

#include <memory>
#include <string>

#include "meta/kv_engine.h"

namespace tierfs {

// Thread-safe: any thread may call any method. Transactions on one NAME are fully
// serialized (one lock held for the whole callback), so they never conflict and are never
// retried. The callback must not start another transaction on an engine sharing the same
// NAME (that would deadlock; a nested Txn on the same engine object returns EDEADLK).
class MemEngine final : public KvEngine {
 public:
  explicit MemEngine(std::string name);
  ~MemEngine() override;

  std::string Describe() const override;
  Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only = false) override;
  Status Reset() override;
  Result<DurabilityReport> Durability() override {
    return DurabilityReport{false, "in memory (tests)", {"everything is lost when the process ends"}};
  }

  struct State;

 private:
  std::string name_;
  std::shared_ptr<State> state_;
};

}  // namespace tierfs
