// `tierfs gateway`: an S3-compatible HTTP(S) server over one volume, on the client library's
// vfs (no FUSE): what is written through S3 is at once visible through every mount and the
// other way round. Several gateways may serve one volume (behind a load balancer).
//
// Ownership: the caller keeps the vfs (and what is under it) alive until Stop returned.
// Threads: Start serves on a pool of its own; Stop may be called from any thread (a signal
// handler's thread included) and returns once in-flight requests are finished.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "gateway/users.h"
#include "meta/types.h"

namespace tierfs {
class Vfs;
}

namespace tierfs::gateway {

struct GatewayOptions {
  std::string host = "127.0.0.1";
  int port = 9000;
  bool multi_buckets = false;
  Ino root = kRootIno;       // --subdir
  std::string volume_name;   // the bucket without --multi-buckets
  std::string domain;        // virtual-host style: BUCKET.DOMAIN
  std::string region = "us-east-1";
  bool anonymous = false;    // requests without credentials: as uid/gid below, read-only
  std::optional<GatewayUser> user;  // --access-key and its secret
  uint32_t uid = 0, gid = 0, umask = 022;  // objects are made as this user by the primary key
  std::string cert_file, key_file;  // HTTPS when both are set
  int threads = 64;          // connections served at once
  std::string access_log;    // a file, "-" for stderr, "" none
  uint64_t upload_max_age_s = 7 * 24 * 3600;  // abandoned multipart uploads are removed after this
};

class Gateway {
 public:
  Gateway(Vfs* vfs, GatewayOptions opts);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;
  // Binds and starts serving (returns once the listener accepts).
  Status Start();
  void Stop();
  std::string address() const;  // "HOST:PORT" bound

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierfs::gateway
