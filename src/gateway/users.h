// Who may use a gateway: the access key it was started with (all buckets), and more users
// kept in the volume (`tierfs gateway-user add|list|remove`), each mapped to a uid and gid,
// seeing the buckets it owns (top-level directories of its uid, with --multi-buckets) plus
// those granted to it, optionally read-only.
//
// Stored in the metadata engine under "GU" + access key (JSON, docs/key-schema.md), so that
// every gateway of a volume knows them; a gateway rereads them every few seconds.
//
// Threads: any.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierfs {
class KvEngine;
}

namespace tierfs::gateway {

struct GatewayUser {
  std::string access_key;
  std::string secret_key;
  uint32_t uid = 0, gid = 0;
  bool read_only = false;
  bool all_buckets = false;          // the gateway's own key
  std::vector<std::string> buckets;  // granted (besides its own)
  std::string display_name;

  bool MaySee(const std::string& bucket, uint32_t bucket_uid) const;
};

class Users {
 public:
  // primary: the gateway's --access-key (empty: none).
  Users(KvEngine* engine, std::optional<GatewayUser> primary);
  std::optional<GatewayUser> Find(const std::string& access_key);

  static Status Add(KvEngine* engine, const GatewayUser& u);
  static Status Remove(KvEngine* engine, const std::string& access_key);
  static Result<std::vector<GatewayUser>> List(KvEngine* engine);

 private:
  void Refresh();
  KvEngine* engine_;
  std::optional<GatewayUser> primary_;
  std::mutex mu_;
  std::vector<GatewayUser> users_;  // guarded by mu_
  int64_t loaded_ns_ = 0;           // guarded by mu_
};

// A secret key as the commands take it: the first line of `file` when given, else
// $TIERFS_GATEWAY_SECRET_KEY (never the command line); trailing whitespace dropped; "" when
// neither is set.
Result<std::string> ReadSecretKey(const std::string& file);

}  // namespace tierfs::gateway
