// PeerServer: the listener of a cache-group member. It serves whole blocks of its own
// volume to members that present a valid MAC (group/wire.h), from the provider (the
// member's CachedStore::ServeBlock: memory, disk, or the store once), without copying
// the block into the reply. The connections and their limits (slow senders, connections
// per address) are group/peer_listener.h's.
//
// Threads: Start and Stop from one thread; requests run on the listener's workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "group/peer_listener.h"

namespace tierfs::group {

struct PeerServerOptions {
  std::string host = "0.0.0.0";  // address to bind
  int port = 0;                  // 0: an ephemeral port
  std::string volume_name;       // only keys of this volume are served
  std::string volume_uuid;
  std::string secret;
  int threads = 16;
  // Connection limits (group/peer_listener.h); host, port and threads above override
  // its fields.
  ListenerOptions limits;
};

struct PeerServerStats {
  uint64_t served = 0;
  uint64_t refused = 0;  // bad MAC, stale time, another volume, malformed
  uint64_t failed = 0;   // the provider could not get the block
  ListenerStats connections;
};

class PeerServer {
 public:
  // keep_on_disk: the asker warms the group up (&warm=1): the block is on the member's disk
  // cache when the provider returns.
  using Provider = std::function<Result<std::shared_ptr<const std::string>>(const std::string& key, uint32_t len,
                                                                           bool keep_on_disk)>;

  PeerServer(PeerServerOptions options, Provider provider);
  ~PeerServer();
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  // Binds and starts listening; EADDRINUSE or EADDRNOTAVAIL name the address.
  Status Start();
  // The port it listens on (after Start).
  int port() const { return port_; }
  void Stop();
  PeerServerStats stats() const;

  // Test hook: flip a byte of every block served (after its checksums are computed), so
  // tests show that a damaged reply is never used. Set from TIERFS_FAULT_PEER_CORRUPT.
  void set_corrupt_replies(bool on) { corrupt_ = on; }

 private:
  void Handle(const ListenerRequest& req, ListenerReply* res);

  PeerServerOptions opts_;
  Provider provider_;
  std::unique_ptr<PeerListener> listener_;
  int port_ = 0;
  std::atomic<bool> corrupt_{false};
  std::atomic<uint64_t> served_{0}, refused_{0}, failed_{0};
};

}  // namespace tierfs::group
