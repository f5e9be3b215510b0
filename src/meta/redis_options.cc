#include "meta/redis_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/duration.h"
#include "common/secret.h"

namespace tierfs::redis {

namespace {

constexpr char kForm[] = "expected redis://[USER:PASSWORD@]HOST[:PORT][/DB][?timeout=30s]";

}  // namespace

Result<Options> ParseOptions(const Url& url) {
  Options o;
  o.describe = url.Redacted();
  if (url.scheme == "rediss") {
    return Status::Err(EPROTONOSUPPORT, "TLS to Redis (" + o.describe +
                                            ") is not supported by this build; use redis:// over "
                                            "a trusted network or a TLS tunnel");
  }
  o.conn.host = url.host.empty() ? "127.0.0.1" : url.host;
  // "[::1]" -> "::1" for the resolver.
  if (o.conn.host.size() > 2 && o.conn.host.front() == '[' && o.conn.host.back() == ']') {
    o.conn.host = o.conn.host.substr(1, o.conn.host.size() - 2);
  }
  o.conn.port = url.port != 0 ? url.port : 6379;
  std::string db = url.path;
  if (!db.empty() && db.back() == '/') db.pop_back();
  if (!db.empty()) {
    if (db.size() > 6 || db.find_first_not_of("0123456789") != std::string::npos) {
      return Status::Err(EINVAL, "bad Redis database number '" + db + "' in " + o.describe + ": " +
                                     kForm + " with DB a number (0-15 on a default server)");
    }
    o.conn.db = std::stoi(db);
  }
  for (const auto& [key, value] : url.query) {
    if (key == "timeout") {
      if (!ParseDuration(value, &o.deadline)) {
        return Status::Err(EINVAL, "bad timeout '" + value + "' in " + o.describe +
                                       ": expected a duration such as 30s, 500ms or 2m");
      }
    } else {
      return Status::Err(EINVAL, "unknown option '" + key + "' in " + o.describe +
                                     "; the Redis engine knows: timeout");
    }
  }
  // A transaction that may retry for only 2 s should not wait 10 s for one reply.
  using std::chrono::milliseconds;
  o.conn.io_timeout = std::clamp(o.deadline, milliseconds(500), milliseconds(10000));
  o.conn.connect_timeout = std::clamp(o.deadline, milliseconds(500), milliseconds(3000));
  o.conn.user = url.user;
  auto password = ResolveSecret(url.password, kMetaPasswordEnv);
  if (!password.ok()) return password.status();
  o.conn.password = *password;
  if (!o.conn.user.empty() && o.conn.password.empty()) {
    return Status::Err(EINVAL, "the META-URL " + o.describe + " names user '" + o.conn.user +
                                   "' but no password is given (in the URL or $" +
                                   kMetaPasswordEnv + "); " + kForm);
  }
  o.conn.where = o.describe;
  return o;
}

}  // namespace tierfs::redis
