// Which engines the current thread is inside a transaction of. Engines use it to turn a
// nested Txn (a self-deadlock, or a second transaction that cannot see the first's
// writes) into an EDEADLK error. An engine is identified by any stable address it owns.
#pragma once

#include <algorithm>
#include <vector>

namespace tierfs {

class TxnNesting {
 public:
  // True while the current thread runs a transaction of `engine`.
  static bool Inside(const void* engine) {
    auto& v = Active();
    return std::find(v.begin(), v.end(), engine) != v.end();
  }

  // Marks the current thread as inside a transaction of `engine` for the mark's lifetime.
  class Mark {
   public:
    explicit Mark(const void* engine) : engine_(engine) { Active().push_back(engine); }
    ~Mark() {
      auto& v = Active();
      auto it = std::find(v.begin(), v.end(), engine_);
      if (it != v.end()) v.erase(it);
    }
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;

   private:
    const void* engine_;
  };

 private:
  static std::vector<const void*>& Active() {
    thread_local std::vector<const void*> active;
    return active;
  }
};

}  // namespace tierfs
