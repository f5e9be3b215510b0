#include "common/secret.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tierfs {

Result<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Err(errno ? errno : EIO, "cannot read secret file " + path + ": " + strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

Result<std::string> ResolveSecret(const std::string& given, const std::string& env_name) {
  if (!given.empty()) return given;
  if (const char* v = getenv(env_name.c_str()); v && *v) return std::string(v);
  std::string file_var = env_name + "_FILE";
  if (const char* f = getenv(file_var.c_str()); f && *f) {
    auto r = ReadSecretFile(f);
    if (!r.ok()) return Status::Err(r.status().code(), r.status().message() + " (named by $" + file_var + ")");
    return r;
  }
  return std::string();
}

std::string Redact(const std::string& secret) { return secret.empty() ? "" : "****"; }

}  // namespace tierfs
