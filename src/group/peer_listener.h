// PeerListener: the HTTP/1.1 listener behind a cache-group member's PeerServer, made for
// a port any local user (and anyone on the network) can connect to.
//
// A connection costs a worker thread only while a complete request is being answered:
// request lines and headers are read by one event thread (epoll), so connections that
// send slowly ("slowloris": a byte every few seconds) hold a descriptor, never a worker.
// Every limit is per connection and total, not per byte:
//   - a request's line and headers must arrive within header_timeout of their first byte,
//     and the first byte within idle_timeout of the connection's start or of the previous
//     reply (keep-alive); otherwise the connection is closed;
//   - requests carry no body (a Content-Length or Transfer-Encoding is refused, 400);
//   - a reply must be sent within reply_timeout, or the connection is closed;
//   - at most max_per_address connections per client address and max_connections in all;
//     past either, new connections are closed at once, so one address cannot take the
//     slots real peers need;
//   - requests wait for a worker in a queue of at most `threads` entries; past that they
//     are answered 503 at once.
//
// Threads: Start and Stop from one thread; the handler runs on the workers, several at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs::group {

struct ListenerOptions {
  std::string host = "0.0.0.0";  // address to bind (IPv4 or IPv6 literal, or a name)
  int port = 0;                  // 0: an ephemeral port
  int threads = 16;
  int max_connections = 1024;
  int max_per_address = 32;
  int64_t idle_timeout_ms = 2000;
  int64_t header_timeout_ms = 5000;
  int64_t reply_timeout_ms = 30000;
  size_t max_header_bytes = 16384;
};

struct ListenerRequest {
  std::string method;
  std::string path;                            // without the query
  std::map<std::string, std::string> params;   // query parameters, percent-decoded
  std::map<std::string, std::string> headers;  // lowercase names, trimmed values
  std::string peer;                            // the client's address
};

struct ListenerReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers;
  // The body, sent in order without copying.
  std::vector<std::shared_ptr<const std::string>> body;

  void SetText(int code, std::string text);
};

struct ListenerStats {
  uint64_t connections = 0;     // open now
  uint64_t accepted = 0;
  uint64_t refused = 0;         // closed at accept: per-address or total limit
  uint64_t timed_out = 0;       // closed because headers or a reply took too long
  uint64_t bad_requests = 0;    // malformed, too large, or with a body
  uint64_t busy = 0;            // answered 503: every worker busy and the queue full
};

class PeerListener {
 public:
  using Handler = std::function<void(const ListenerRequest&, ListenerReply*)>;

  PeerListener(ListenerOptions options, Handler handler);
  ~PeerListener();  // Stop()
  PeerListener(const PeerListener&) = delete;
  PeerListener& operator=(const PeerListener&) = delete;

  // Binds and starts serving; EADDRINUSE / EADDRNOTAVAIL name the address.
  Status Start();
  int port() const { return port_; }
  // Stops accepting, closes idle and half-read connections, and waits for the replies
  // being made.
  void Stop();
  ListenerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tierfs::group
