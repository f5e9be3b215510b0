// META-URL parsing for the Redis metadata engine:
//   redis://[USER:PASSWORD@]HOST[:PORT][/DB][?timeout=30s]
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"
#include "common/url.h"
#include "meta/redis_conn.h"

namespace tierfs::redis {

struct Options {
  ConnParams conn;
  // How long a transaction keeps retrying conflicts and an unreachable server before it
  // fails with EIO ("timeout" in the URL query: "30s", "500ms", "2m" or plain seconds).
  std::chrono::milliseconds deadline{30000};
  // The URL with the password redacted, for Describe() and messages.
  std::string describe;
};

// The password comes from the URL, else from $TIERFS_META_PASSWORD or the file named by
// $TIERFS_META_PASSWORD_FILE. Errors are EINVAL with a message that shows the expected
// form (never the password); rediss:// (TLS) is EPROTONOSUPPORT.
Result<Options> ParseOptions(const Url& url);

}  // namespace tierfs::redis
