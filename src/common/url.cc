#include "common/url.h"

#include <cerrno>

namespace tierfs {

std::string Url::Redacted() const {
  if (password.empty()) return original;
  std::string out = original;
  size_t at = out.find('@');
  size_t colon = out.find(':', scheme.size() + 3);
  if (at != std::string::npos && colon != std::string::npos && colon < at) {
    out.replace(colon + 1, at - colon - 1, "****");
  }
  return out;
}

Result<Url> ParseUrl(const std::string& text) {
  Url u;
  u.original = text;
  size_t sep = text.find("://");
  if (sep == std::string::npos || sep == 0) {
    return Status::Err(EINVAL, "malformed URL '" + text +
                                   "': expected scheme://..., for example sqlite3:///var/lib/tierfs/vol.db");
  }
  u.scheme = text.substr(0, sep);
  std::string rest = text.substr(sep + 3);
  if (u.scheme == "sqlite3" || u.scheme == "file" || u.scheme == "mem") {
    size_t q = rest.find('?');
    u.path = rest.substr(0, q);
    if (q != std::string::npos) rest = rest.substr(q + 1); else rest.clear();
  } else {
    size_t q = rest.find('?');
    std::string query = q == std::string::npos ? "" : rest.substr(q + 1);
    rest = rest.substr(0, q);
    size_t slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    u.path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    size_t at = authority.rfind('@');
    if (at != std::string::npos) {
      std::string cred = authority.substr(0, at);
      authority = authority.substr(at + 1);
      size_t c = cred.find(':');
      u.user = cred.substr(0, c);
      if (c != std::string::npos) u.password = cred.substr(c + 1);
    }
    size_t colon = authority.rfind(':');
    // A list of hosts whose last one has no port ("h1:5432,h2") keeps its ports in host
    // (the engine splits the list); so does one with an IPv6 literal.
    if (colon != std::string::npos && authority.find(']') == std::string::npos &&
        authority.find(',', colon) == std::string::npos) {
      std::string port = authority.substr(colon + 1);
      authority = authority.substr(0, colon);
      char* end = nullptr;
      long p = strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || p <= 0 || p > 65535) {
        return Status::Err(EINVAL, "malformed URL '" + u.Redacted() + "': bad port '" + port + "'");
      }
      u.port = static_cast<int>(p);
    }
    u.host = authority;
    rest = query;
  }
  // query string: k=v&k2=v2
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t amp = rest.find('&', pos);
    std::string kv = rest.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    size_t eq = kv.find('=');
    if (!kv.empty()) u.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return u;
}

}  // namespace tierfs
