// Narrower limits for the object-store requests a thread makes: fewer attempts, an earlier
// deadline (README, "When the object store fails").
//
// One retry policy per request path: the object store's client (object/http_retry.h, for S3
// and Azure) is the only layer that retries a store request, within its own limits (the
// bucket URL's ?tries=, and `mount --io-timeout` from the request's start,
// StorageSpec::io_timeout_s). Callers that retry by design set a budget instead of
// retrying around it: write-back's uploads, which retry until they land, ask for one
// attempt per call (max_tries = 1) and keep the only retry loop themselves; the clean-up
// after a failed upload gets a short deadline, so a dead store does not make a close wait
// for it once more.
//
// Threads: the budget is per thread; ScopedIoBudget sets it for a scope and restores the
// previous one.
#pragma once

#include <cstdint>

namespace tierfs {

struct IoBudget {
  int64_t deadline_ns = 0;  // CLOCK_MONOTONIC (MonoNanos); 0: none beyond the store's own
  int max_tries = 0;        // 0: the store's own
};

// The calling thread's budget (default: none).
IoBudget CurrentIoBudget();

class ScopedIoBudget {
 public:
  // Narrows the current budget: the earlier deadline, the fewer tries.
  explicit ScopedIoBudget(IoBudget b);
  ~ScopedIoBudget();
  ScopedIoBudget(const ScopedIoBudget&) = delete;
  ScopedIoBudget& operator=(const ScopedIoBudget&) = delete;

  // A budget ending `ns` from now (0: none).
  static IoBudget Within(int64_t ns);

 private:
  IoBudget saved_;
};

}  // namespace tierfs
