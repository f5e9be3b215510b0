// The retry policy of the HTTP object stores (S3, Azure Blob): one request, attempted until
// it gets an answer that need not be tried again, within a number of tries and a deadline.
//
// Attempts that fail on the network (refused, reset, timed out) and answers the caller's
// `retryable` judges transient (HTTP 5xx, 429, a store's "slow down" codes) are tried again
// after an exponential, jittered pause (common/backoff.h: 100 ms doubling up to 5 s, drawn
// from [d/2, d]), at most policy.tries times and never past the deadline: policy.deadline_s
// after the request began, or the calling thread's own (common/io_budget.h), whichever
// comes first; the budget's max_tries also narrows the tries. An attempt's connect and
// stall limits shrink to the time left, so a hung server costs the deadline, not
// tries x timeout. This is the only retry loop on a store request.
//
// Threads: PerformWithRetries may be called from any thread concurrently (HttpClient is
// thread-safe; make and retryable are called on the calling thread only).
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "object/http_client.h"
#include "object/object_store.h"

namespace tierfs {

struct RetryPolicy {
  int tries = 10;
  long connect_timeout_s = 5;
  long io_timeout_s = 30;                // an attempt's stall limit
  long deadline_s = kDefaultIoTimeoutS;  // the request's, retries included
};

struct RetriedResponse {
  HttpResponse response;  // the last answer, whatever its status
  int tries = 0;          // attempts made; > 1 means an earlier one may have taken effect
};

struct RetriedCall {
  std::string log_tag;   // "s3", "azure": the warning's prefix
  std::string what;      // "read object K", for the warning
  std::string endpoint;  // "http://HOST:PORT", what messages name
  std::string failure;   // "cannot read object K in s3://...": the start of error messages
  // Builds the request for one attempt (signed anew: signatures carry the time).
  std::function<HttpRequest()> make;
  // True when resp should be tried again; sets *reason ("HTTP 503 ServerBusy") for the log.
  std::function<bool(const HttpResponse& resp, std::string* reason)> retryable;
};

// Returns the last HTTP answer, also a final transient one (the caller phrases it), or EIO
// "FAILURE: cannot reach ENDPOINT: ... (gave up after N tries in S s)" when no attempt got
// an answer, or at once for a request that can never be sent (a malformed URL).
Result<RetriedResponse> PerformWithRetries(HttpClient& http, const RetryPolicy& policy, const RetriedCall& call);

}  // namespace tierfs
