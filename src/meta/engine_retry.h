// How the engines on a server (Redis, etcd) retry a transaction's attempts: conflicts
// quickly, an unavailable server more gently, each with jittered exponential backoff,
// until the transaction's deadline; then EIO saying why. A warning is logged once a
// transaction has been retrying for a while, so a stalled mount says what it waits for.
#pragma once

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "common/backoff.h"
#include "common/status.h"

namespace tierfs {

// What one attempt of a transaction came to.
struct Attempt {
  enum Kind { kDone, kConflict, kUnavailable } kind = kDone;
  Status status;
  static Attempt Done(Status s) { return {kDone, std::move(s)}; }
  static Attempt Conflict() { return {kConflict, Status::OK()}; }
  static Attempt Unavailable(Status s) { return {kUnavailable, std::move(s)}; }
};

struct RetryPolicy {
  std::chrono::microseconds conflict_base{200}, conflict_cap{50'000};
  std::chrono::microseconds server_base{10'000}, server_cap{1'000'000};
  std::chrono::seconds warn_after{2};
};

// Runs attempt_fn until it is done or the deadline would pass. engine: Describe() of the
// engine; what: "a write transaction" and the like, for messages.
template <typename F>
Status RetryAttempts(const std::string& engine, const char* what, std::chrono::steady_clock::time_point deadline,
                     F&& attempt_fn, const RetryPolicy& p = RetryPolicy{}) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  bool warned = false;
  int conflicts = 0, outages = 0;
  for (;;) {
    Attempt a = attempt_fn();
    if (a.kind == Attempt::kDone) return a.status;
    bool conflict = a.kind == Attempt::kConflict;
    // The first retry after a lost connection reconnects at once: usually just that
    // connection died (or the server restarted) and a new one works.
    auto wait = conflict       ? JitteredBackoff(conflicts, p.conflict_base, p.conflict_cap)
                : outages == 0 ? std::chrono::microseconds(0)
                               : JitteredBackoff(outages - 1, p.server_base, p.server_cap);
    (conflict ? conflicts : outages)++;
    auto now = Clock::now();
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    if (now + wait > deadline) {
      if (conflict) {
        return Status::Err(EIO, "metadata engine " + engine + ": " + what + " still conflicted after " +
                                    std::to_string(conflicts) + " retries in " + std::to_string(waited.count()) +
                                    " ms (other clients keep changing the same keys); try again");
      }
      return Status::Err(EIO, a.status.message() + "; gave up after " + std::to_string(waited.count()) +
                                  " ms (the META-URL option ?timeout= sets how long to wait)");
    }
    if (!warned && now - start > p.warn_after) {
      warned = true;
      if (conflict) {
        spdlog::warn("metadata engine {}: {} keeps conflicting ({} retries so far)", engine, what, conflicts);
      } else {
        spdlog::warn("metadata engine {}: {} is waiting for the server: {}", engine, what, a.status.message());
      }
    }
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace tierfs
