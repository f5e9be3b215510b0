// META-URL parsing for the Redis metadata engine:
//   redis://[USER:PASSWORD@]HOST[:PORT][/DB][?timeout=30s&wait-replicas=N]
//   redis://[USER:PASSWORD@]MASTER_NAME,S1[:26379],S2[:26379],...[/DB][?...]   (Sentinel)
// A host list with a comma names a master watched by Redis Sentinel: the first element is
// the master's name as the Sentinels know it, the rest are the Sentinels (default port
// 26379). The password is the master's (and its replicas'); Sentinels are dialled without
// one (a Sentinel that demands one is reported).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/url.h"
#include "meta/redis_conn.h"

namespace tierfs::redis {

struct Options {
  // The server to use; with Sentinels, host and port are filled in from their answer.
  ConnParams conn;
  // How long a transaction keeps retrying conflicts and an unreachable server before it
  // fails with EIO ("timeout" in the URL query: "30s", "500ms", "2m" or plain seconds).
  std::chrono::milliseconds deadline{30000};
  // Sentinel mode: the master's name and the Sentinels (host, port). Empty: one server.
  std::string master_name;
  std::vector<std::pair<std::string, int>> sentinels;
  // "wait-replicas": after each commit, WAIT until this many replicas hold it (0: do not).
  int wait_replicas = 0;
  // The URL with the password redacted, for Describe() and messages.
  std::string describe;
};

// The password comes from the URL, else from $TIERFS_META_PASSWORD or the file named by
// $TIERFS_META_PASSWORD_FILE. Errors are EINVAL with a message that shows the expected
// form (never the password); rediss:// (TLS) is EPROTONOSUPPORT.
Result<Options> ParseOptions(const Url& url);

}  // namespace tierfs::redis
