// HttpClient: one HTTP request/response exchange at a time per caller, over a pool of
// libcurl easy handles so that connections (and TLS sessions, DNS answers) are reused.
//
// Perform() makes exactly one attempt; retry policy belongs to the caller. A request that
// got any HTTP response (whatever its status) succeeds; a transport failure returns a
// Status whose code says whether trying again can help:
//   ETIMEDOUT     connect timeout, or the transfer stalled (below 1 byte/s for io_timeout)
//   ECONNREFUSED  nothing listens at the address
//   EIO           other network failures (reset, resolve failure, truncated reply, TLS)
//   EINVAL        requests that can never succeed (malformed URL, unsupported protocol,
//                 certificate rejected)
// The message is short ("Connection refused", "Operation timed out after 1001 ms ...")
// and never contains request headers.
//
// Threads: Perform may be called from any thread concurrently; each call borrows its own
// handle.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "object/s3_sign.h"

namespace tierfs {

struct HttpRequest {
  std::string method;  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  HeaderList headers;
  // The body, sent as the concatenation of the pieces without copying them; they must
  // stay valid during Perform.
  std::vector<std::string_view> body;
  // This exchange's limits when positive, else the client's (HttpClientOptions): the
  // caller's retry policy narrows them as its deadline nears.
  long connect_timeout_ms = 0;
  long io_timeout_s = 0;
  long total_timeout_ms = 0;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lowercase names, values trimmed
  std::string body;

  // The header value, or "" when absent.
  std::string Header(const std::string& lowercase_name) const;
};

// Ranged reads, as the HTTP stores (S3, Azure) send and answer them.
// The Range value for len bytes at off ("bytes=OFF-" when len < 0); "" for a whole read.
std::string ByteRange(uint64_t off, int64_t len);
// The bytes asked for, from a 206, a 200 (a server that ignores Range sends everything) or
// a 416 (the range starts at or after the end: nothing); nullopt for any other status.
std::optional<std::string> RangedBody(HttpResponse& resp, uint64_t off, int64_t len);

struct HttpClientOptions {
  long connect_timeout_ms = 5000;
  // A transfer slower than 1 byte/s for this long fails with ETIMEDOUT.
  long io_timeout_s = 30;
  // The whole exchange may take at most this long (ETIMEDOUT); 0: no limit.
  long total_timeout_ms = 0;
  // Idle handles kept for reuse; more concurrent requests get temporary handles.
  size_t max_idle_handles = 64;
  // TLS: a CA bundle (PEM file) to trust instead of the system's, and a client
  // certificate and its key (PEM files) for servers that ask for one. Empty: not used.
  struct Tls {
    std::string ca_file, cert_file, key_file;
  } tls;
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpResponse> Perform(const HttpRequest& req);

 private:
  void* Acquire();  // a CURL*, kept opaque so that users need not include curl.h
  void Release(void* handle);

  HttpClientOptions options_;
  std::mutex mu_;
  std::vector<void*> idle_;  // guarded by mu_
};

// Parses an HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT") to nanoseconds since the epoch;
// 0 when it cannot be parsed.
int64_t ParseHttpDate(const std::string& text);

}  // namespace tierfs
