#include "object/http_retry.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/io_budget.h"

namespace tierfs {
namespace {

// Backoff before try n+1 is drawn from [d/2, d] with d = min(kBackoffCap, kBackoffBase * 2^(n-1)):
// exponential to relieve an overloaded server, jittered so that many clients that failed
// together do not retry together.
constexpr std::chrono::milliseconds kBackoffBase(100);
constexpr std::chrono::milliseconds kBackoffCap(5000);

std::chrono::milliseconds Backoff(int attempt) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(JitteredBackoff(
      std::min(attempt - 1, 16), std::chrono::microseconds(kBackoffBase), std::chrono::microseconds(kBackoffCap)));
}

}  // namespace

Result<RetriedResponse> PerformWithRetries(HttpClient& http, const RetryPolicy& policy, const RetriedCall& call) {
  RetriedResponse reply;
  Status last_error;
  // The deadline: the store's own from now, or the calling request's if that is earlier.
  const IoBudget budget = CurrentIoBudget();
  const int64_t start = MonoNanos();
  int64_t deadline = start + static_cast<int64_t>(policy.deadline_s) * 1000000000;
  if (budget.deadline_ns != 0 && budget.deadline_ns < deadline) deadline = budget.deadline_ns;
  const int tries = budget.max_tries > 0 ? std::min(budget.max_tries, policy.tries) : policy.tries;
  auto spent = [&] { return std::to_string((MonoNanos() - start + 500000000) / 1000000000) + " s"; };
  if (start >= deadline) {
    return Status::Err(EIO, call.failure + ": no time left to ask " + call.endpoint +
                                " (the request already waited its --io-timeout for the object store)");
  }
  for (int attempt = 1; attempt <= tries; ++attempt) {
    if (attempt > 1) {
      auto pause = Backoff(attempt - 1);
      if (MonoNanos() + std::chrono::duration_cast<std::chrono::nanoseconds>(pause).count() >= deadline) break;
      std::this_thread::sleep_for(pause);
    }
    reply.tries = attempt;
    HttpRequest req = call.make();
    // The attempt may not outlast the deadline by waiting (a connection or a transfer that
    // stalls); a transfer that makes progress is not cut.
    int64_t left_ms = std::max<int64_t>(1, (deadline - MonoNanos()) / 1000000);
    req.connect_timeout_ms = static_cast<long>(std::min<int64_t>(policy.connect_timeout_s * 1000, left_ms));
    req.io_timeout_s =
        static_cast<long>(std::min<int64_t>(policy.io_timeout_s, std::max<int64_t>(1, (left_ms + 999) / 1000)));
    Result<HttpResponse> r = http.Perform(req);
    std::string reason;
    if (!r.ok()) {
      if (r.status().code() == EINVAL) {
        return Status::Err(EIO, call.failure + ": cannot send a request to " + call.endpoint + ": " +
                                    r.status().message());
      }
      last_error = r.status();
      reason = r.status().message();
    } else {
      if (!call.retryable(*r, &reason)) {
        reply.response = std::move(*r);
        return reply;
      }
      last_error = Status();
      reply.response = std::move(*r);
    }
    if (attempt < tries && MonoNanos() < deadline) {
      spdlog::warn("{}: {} at {} failed (try {} of {}), retrying: {}", call.log_tag, call.what, call.endpoint, attempt,
                   tries, reason);
    }
  }
  if (last_error.ok()) return reply;  // a final transient answer: the caller phrases it
  std::string problem = last_error.code() == ETIMEDOUT ? "no timely answer from " : "cannot reach ";
  return Status::Err(EIO, call.failure + ": " + problem + call.endpoint + ": " + last_error.message() +
                              " (gave up after " + std::to_string(reply.tries) + " tries in " + spent() + ")");
}

}  // namespace tierfs
