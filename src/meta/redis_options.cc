#include "meta/redis_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/duration.h"
#include "common/secret.h"

namespace tierfs::redis {

namespace {

constexpr char kForm[] =
    "expected redis://[USER:PASSWORD@]HOST[:PORT][/DB][?timeout=30s&wait-replicas=N] or, with Sentinels, "
    "redis://[USER:PASSWORD@]MASTER_NAME,SENTINEL1[:26379],SENTINEL2[:26379],...[/DB]";

// "[::1]" -> "::1" for the resolver.
std::string Unbracket(std::string host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

// Splits "name,h1:26379,h2" (the parser took the last ":PORT" as url.port: put it back).
Status ParseSentinels(const Url& url, const std::string& describe, Options* o) {
  std::string hosts = url.host + (url.port ? ":" + std::to_string(url.port) : "");
  std::vector<std::string> parts;
  size_t pos = 0;
  for (;;) {
    size_t comma = hosts.find(',', pos);
    parts.push_back(hosts.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  o->master_name = parts[0];
  if (o->master_name.empty() || o->master_name.find(':') != std::string::npos) {
    return Status::Err(EINVAL, "bad master name '" + o->master_name + "' in " + describe +
                                   ": with Sentinels the first host is the master's name as they know it "
                                   "(sentinel monitor NAME ...); " + kForm);
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& h = parts[i];
    if (h.empty()) return Status::Err(EINVAL, "an empty Sentinel in " + describe + "; " + kForm);
    size_t colon = h.rfind(':');
    int port = 26379;
    std::string host = h;
    if (colon != std::string::npos && h.back() != ']') {
      host = h.substr(0, colon);
      std::string p = h.substr(colon + 1);
      char* end = nullptr;
      long n = strtol(p.c_str(), &end, 10);
      if (p.empty() || *end || n <= 0 || n > 65535) {
        return Status::Err(EINVAL, "bad Sentinel port '" + p + "' in " + describe + "; " + kForm);
      }
      port = static_cast<int>(n);
    }
    o->sentinels.emplace_back(Unbracket(host), port);
  }
  return Status::OK();
}

}  // namespace

Result<Options> ParseOptions(const Url& url) {
  Options o;
  o.describe = url.Redacted();
  if (url.scheme == "rediss") {
    return Status::Err(EPROTONOSUPPORT, "TLS to Redis (" + o.describe +
                                            ") is not supported by this build; use redis:// over "
                                            "a trusted network or a TLS tunnel");
  }
  if (url.host.find(',') != std::string::npos) {
    RETURN_IF_ERROR(ParseSentinels(url, o.describe, &o));
  } else {
    o.conn.host = url.host.empty() ? "127.0.0.1" : Unbracket(url.host);
    o.conn.port = url.port != 0 ? url.port : 6379;
  }
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
    } else if (key == "wait-replicas") {
      char* end = nullptr;
      long n = strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || n < 0 || n > 100) {
        return Status::Err(EINVAL, "bad wait-replicas '" + value + "' in " + o.describe +
                                       ": expected how many replicas must hold each commit before it is "
                                       "acknowledged (0 to 100)");
      }
      o.wait_replicas = static_cast<int>(n);
    } else {
      return Status::Err(EINVAL, "unknown option '" + key + "' in " + o.describe +
                                     "; the Redis engine knows: timeout, wait-replicas");
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
