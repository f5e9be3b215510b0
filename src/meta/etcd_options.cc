#include "meta/etcd_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/duration.h"
#include "common/secret.h"

namespace tierfs::etcd {

namespace {

constexpr char kForm[] =
    "expected etcd://[USER:PASSWORD@]HOST1[:PORT],HOST2[:PORT],.../PREFIX[?timeout=30s&request-timeout=3s&"
    "max-txn-ops=128&api=grpc|json], or etcds://... with TLS [&ca=CA.pem&cert=CLIENT.pem&key=CLIENT-KEY.pem]";

// A TLS file named in the URL must be readable now, not at the first request.
Status CheckReadable(const std::string& what, const std::string& path, const std::string& describe) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) {
    int e = errno;
    return Status::Err(e == ENOENT ? ENOENT : EACCES, "cannot read the " + what + " '" + path + "' named in " +
                                                          describe + ": " + strerror(e));
  }
  fclose(f);
  return Status::OK();
}

}  // namespace

Result<Options> ParseOptions(const Url& url) {
  Options o;
  o.client.tls = url.scheme == "etcds";
  // The parser took the last ":PORT" as the port: put it back and split the members.
  std::string hosts = url.host + (url.port ? ":" + std::to_string(url.port) : "");
  size_t pos = 0;
  while (pos <= hosts.size()) {
    size_t comma = hosts.find(',', pos);
    std::string h = hosts.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (h.empty()) return Status::Err(EINVAL, "an empty host in " + url.Redacted() + "; " + kForm);
    if (h.find(':') == std::string::npos) h += ":2379";
    o.client.endpoints.push_back(h);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::string prefix = url.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::string who = url.user.empty() ? "" : url.user + "@";
  std::string members;
  for (const auto& e : o.client.endpoints) members += (members.empty() ? "" : ",") + e;
  o.describe = url.scheme + "://" + who + members + "/" + prefix;
  if (prefix.empty()) {
    return Status::Err(EINVAL, "no PREFIX in " + o.describe +
                                   ": the volume needs a prefix of its own in the cluster (etcd://" + members +
                                   "/myvolume); " + kForm);
  }
  o.prefix = prefix + "/";
  for (const auto& [key, value] : url.query) {
    if (key == "timeout" || key == "request-timeout") {
      auto* d = key == "timeout" ? &o.deadline : &o.client.request_timeout;
      if (!ParseDuration(value, d)) {
        return Status::Err(EINVAL, "bad " + key + " '" + value + "' in " + o.describe +
                                       ": expected a duration such as 30s, 500ms or 2m");
      }
    } else if (key == "api") {
      if (value == "grpc") {
        o.client.api = ClientOptions::Api::kGrpc;
      } else if (value == "json") {
        o.client.api = ClientOptions::Api::kJson;
      } else {
        return Status::Err(EINVAL, "bad api '" + value + "' in " + o.describe + ": expected grpc or json");
      }
    } else if (key == "ca" || key == "cert" || key == "key") {
      if (!o.client.tls) {
        return Status::Err(EINVAL, "'" + key + "' in " + o.describe + " is a TLS option: use etcds://; " + kForm);
      }
      RETURN_IF_ERROR(CheckReadable(key == "ca" ? "CA bundle" : key == "cert" ? "client certificate" : "client key",
                                    value, o.describe));
      (key == "ca" ? o.client.ca_file : key == "cert" ? o.client.cert_file : o.client.key_file) = value;
    } else if (key == "max-txn-ops") {
      char* end = nullptr;
      long n = strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || n < 8 || n > 1000000) {
        return Status::Err(EINVAL, "bad max-txn-ops '" + value + "' in " + o.describe +
                                       ": expected the cluster's --max-txn-ops, 8 or more");
      }
      o.max_txn_ops = static_cast<size_t>(n);
    } else {
      return Status::Err(EINVAL, "unknown option '" + key + "' in " + o.describe +
                                     "; the etcd engine knows: timeout, request-timeout, max-txn-ops, api, and with "
                                     "etcds:// ca, cert, key");
    }
  }
  if (o.client.cert_file.empty() != o.client.key_file.empty()) {
    return Status::Err(EINVAL, o.describe + " names a client " + (o.client.cert_file.empty() ? "key" : "certificate") +
                                   " without its " + (o.client.cert_file.empty() ? "certificate" : "key") +
                                   ": give both cert= and key=");
  }
  // One request never waits longer than the whole transaction may.
  o.client.request_timeout = std::min(o.client.request_timeout, o.deadline);
  o.client.user = url.user;
  auto password = ResolveSecret(url.password, kMetaPasswordEnv);
  if (!password.ok()) return password.status();
  o.client.password = *password;
  if (!o.client.user.empty() && o.client.password.empty()) {
    return Status::Err(EINVAL, "the META-URL " + o.describe + " names user '" + o.client.user +
                                   "' but no password is given (in the URL or $" + kMetaPasswordEnv + "); " + kForm);
  }
  o.client.describe = o.describe;
  return o;
}

}  // namespace tierfs::etcd
