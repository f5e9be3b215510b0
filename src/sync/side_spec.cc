#include "sync/side_spec.h"

#include <cerrno>

#include "common/secret.h"
#include "object/object_store.h"
#include "sync/dir_side.h"
#include "sync/volume_side.h"

namespace tierfs::sync {
namespace {

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool IsMetaUrl(const std::string& url) {
  for (const char* p : {"sqlite3://", "redis://", "rediss://", "unix://", "postgres://", "postgresql://", "mem://"}) {
    if (StartsWith(url, p)) return true;
  }
  return false;
}

// Splits "scheme://[userinfo@]host/rest" into its user info (removed from url) and returns it.
std::string TakeUserInfo(std::string* url) {
  size_t sep = url->find("://");
  if (sep == std::string::npos) return "";
  size_t host = sep + 3;
  size_t slash = url->find('/', host);
  size_t at = url->rfind('@', slash == std::string::npos ? std::string::npos : slash);
  if (at == std::string::npos || at < host) return "";
  std::string info = url->substr(host, at - host);
  url->erase(host, at + 1 - host);
  return info;
}

Result<std::string> Credential(const std::string& given, const std::string& from_url, const std::string& env_prefix,
                               const char* suffix, const char* common_env) {
  if (!given.empty()) return given;
  if (!from_url.empty()) return from_url;
  ASSIGN_OR_RETURN(std::string v, ResolveSecret("", env_prefix + suffix));
  if (!v.empty()) return v;
  return ResolveSecret("", common_env);
}

Status BadUrl(const std::string& url, const std::string& why) {
  return Status::Err(EINVAL, "cannot use '" + url + "' as a sync side: " + why);
}

Result<std::unique_ptr<Side>> OpenStore(const SideArgs& a, bool destination) {
  std::string url = a.url;
  StorageSpec spec;
  spec.io_timeout_s = a.io_timeout_s;
  std::string prefix;
  std::string info = TakeUserInfo(&url);
  std::string ak_url, sk_url;
  if (!info.empty()) {
    size_t colon = info.find(':');
    ak_url = info.substr(0, colon);
    if (colon != std::string::npos) sk_url = info.substr(colon + 1);
  }
  auto split_after = [&](size_t start, int segments) -> std::string {  // bucket URL, rest into prefix
    size_t pos = start;
    for (int i = 0; i < segments; ++i) {
      size_t slash = url.find('/', pos);
      if (slash == std::string::npos) return url;
      pos = slash + 1;
    }
    prefix = url.substr(pos);
    return url.substr(0, pos - 1);
  };
  if (StartsWith(url, "rados://")) {
    spec.storage = "rados";
    std::string rest = url.substr(8);
    size_t slash = rest.find('/');
    spec.bucket = rest.substr(0, slash);
    if (slash != std::string::npos) prefix = rest.substr(slash + 1);
    spec.ceph_conf = a.ceph_conf;
  } else if (StartsWith(url, "file://")) {
    spec.storage = "file";
    spec.bucket = url.substr(7);
    if (spec.bucket.empty() || spec.bucket[0] != '/') return BadUrl(a.url, "a file store needs an absolute path");
  } else if (StartsWith(url, "azure+http://") || StartsWith(url, "azure+https://")) {
    spec.storage = "azure";
    url = url.substr(6);
    size_t host = url.find("://") + 3;
    size_t first = url.find('/', host);
    if (first == std::string::npos) return BadUrl(a.url, "no account and container after the host");
    spec.bucket = split_after(first + 1, 2);  // ACCOUNT/CONTAINER
  } else if ((StartsWith(url, "https://") || StartsWith(url, "http://")) &&
             url.find(".blob.core.windows.net") != std::string::npos) {
    spec.storage = "azure";
    size_t host = url.find("://") + 3;
    size_t first = url.find('/', host);
    if (first == std::string::npos) return BadUrl(a.url, "no container after the host");
    spec.bucket = split_after(first + 1, 1);
  } else {
    spec.storage = "s3";
    size_t host = url.find("://") + 3;
    size_t first = url.find('/', host);
    if (first == std::string::npos || first + 1 == url.size()) return BadUrl(a.url, "no bucket after the host");
    spec.bucket = split_after(first + 1, 1);
  }
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  if (spec.storage != "file") {
    ASSIGN_OR_RETURN(spec.access_key, Credential(a.access_key, ak_url, a.env_prefix, "ACCESS_KEY", kAccessKeyEnv));
    ASSIGN_OR_RETURN(spec.secret_key, Credential(a.secret_key, sk_url, a.env_prefix, "SECRET_KEY", kSecretKeyEnv));
    spec.session_token = a.session_token;
  }
  if (spec.storage == "s3" && (spec.access_key.empty() || spec.secret_key.empty())) {
    return BadUrl(a.url, "an S3 side needs an access key and a secret key (--src-/--dst-access-key and "
                         "-secret-key, http://KEY:SECRET@HOST/BUCKET, or $" + a.env_prefix + "ACCESS_KEY and $" +
                         a.env_prefix + "SECRET_KEY)");
  }
  ASSIGN_OR_RETURN(auto store, CreateRawObjectStore(spec));
  if (destination) {
    Status st = store->Init();
    if (!st.ok()) return st.With("cannot use " + store->Describe() + " as the destination");
  } else {
    // A source is only listed: one page proves it is reachable and readable.
    auto probe = store->List(prefix, "", 1);
    if (!probe.ok()) return probe.status().With("cannot list " + store->Describe() + prefix);
  }
  return NewStoreSide(std::move(store), prefix, a.store);
}

}  // namespace

SideKind KindOf(const std::string& url) {
  if (IsMetaUrl(url)) return SideKind::kVolume;
  if (url.find("://") != std::string::npos) return SideKind::kStore;
  return SideKind::kDir;
}

Result<std::unique_ptr<Side>> OpenSide(const SideArgs& a, bool destination, bool dry_run) {
  switch (KindOf(a.url)) {
    case SideKind::kDir:
      return OpenDirSide(a.url, destination && !dry_run, destination && dry_run);
    case SideKind::kStore:
      return OpenStore(a, destination && !dry_run);
    case SideKind::kVolume: {
      size_t scheme_end = a.url.find("://") + 3;
      size_t sep = a.url.rfind(":/");
      std::string meta = a.url, path = "/";
      if (sep != std::string::npos && sep >= scheme_end) {
        meta = a.url.substr(0, sep);
        path = a.url.substr(sep + 1);
      }
      client::VolumeOptions vo = a.volume;
      vo.meta_url = meta;
      return OpenVolumeSide(vo, path, destination && !dry_run);
    }
  }
  return BadUrl(a.url, "unknown kind");
}

}  // namespace tierfs::sync
