// Parsing of META-URLs and storage URLs: scheme://[user[:password]@]host[:port]/path?query
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace tierfs {

struct Url {
  std::string scheme;
  std::string user;
  std::string password;
  std::string host;
  int port = 0;
  std::string path;  // for sqlite3:// the file path, verbatim after "scheme://"
  std::map<std::string, std::string> query;
  std::string original;

  // The URL with the password replaced by "****", for logs and status output.
  std::string Redacted() const;
};

// Parses "scheme://rest". Errors say what was expected.
Result<Url> ParseUrl(const std::string& text);

}  // namespace tierfs
