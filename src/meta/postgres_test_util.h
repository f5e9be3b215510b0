// What the PostgreSQL engine's tests share (postgres_engine_test.cc: opening, URLs,
// conflicts; postgres_faults_test.cc: connections cut and a server restarted): the shared
// test server's URLs, psql, and a schema of the tests' own.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/encoding.h"
#include "common/free_port_for_test.h"
#include "meta/kv_engine.h"
#include "meta/engine_for_test.h"

namespace tierfs::pg_test {

using testing_engines::EncodeU64;
using testing_engines::Increment;
using testing_engines::ReadCounter;
using testing_engines::ServerUrl;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kPgBin[] = "/usr/lib/postgresql/15/bin";

// The database this binary shares with kv_engine_test; the tests that write use a schema of
// their own in it (see EngineUrl), so that ctest may run both binaries at once.
constexpr char kDb[] = "tierfs_kv_test";
constexpr char kSchema[] = "tierfs_pg_engine_test";

// The shared server's URL for database db, or "" when the tests run without servers.
inline std::string DbUrl(const std::string& db) {
  const char* base = getenv("TIERFS_TEST_PG_URL");
  if (base == nullptr || *base == '\0') return "";
  return std::string(base) + "/" + db;
}

// url with one more query parameter.
inline std::string WithQuery(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

#define SKIP_WITHOUT_SERVER(url)                                                              \
  do {                                                                                        \
    if ((url).empty()) GTEST_SKIP() << "no test server: run through ctest, which starts one"; \
  } while (0)

// postgres://user:PASSWORD@host:port/... -> PASSWORD
inline std::string PasswordOf(const std::string& url) {
  size_t start = url.find("://") + 3;
  size_t at = url.find('@', start);
  size_t colon = url.find(':', start);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return "";
  return url.substr(colon + 1, at - colon - 1);
}

inline std::string WithPassword(const std::string& url, const std::string& password) {
  size_t start = url.find("://") + 3;
  size_t at = url.find('@', start);
  size_t colon = url.find(':', start);
  std::string user = url.substr(start, colon - start);
  return url.substr(0, start) + user + (password.empty() ? "" : ":" + password) + url.substr(at);
}

// Runs a shell command, returning its exit status and (in *out) what it printed.
inline int Run(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int rc = pclose(f);
  if (out != nullptr) *out = text;
  return rc;
}

// Runs SQL on the shared server through psql (the engine runs no arbitrary SQL).
inline bool Psql(const std::string& url, const std::string& sql, std::string* out = nullptr) {
  std::string text;
  int rc = Run("psql -X -q -t -A -v ON_ERROR_STOP=1 '" + url + "' -c \"" + sql + "\"", &text);
  if (out != nullptr) *out = text;
  if (rc != 0) ADD_FAILURE() << "psql failed: " << text;
  return rc == 0;
}

inline bool HavePsql() { return Run("psql --version") == 0; }

// The URL of this binary's key space on the shared server (extra: more query parameters),
// or "" when the tests run without servers.
inline std::string EngineUrl(const std::string& extra = "") {
  std::string url = DbUrl(kDb);
  if (url.empty()) return "";
  static const bool have_schema =
      HavePsql() && Psql(url, std::string("CREATE SCHEMA IF NOT EXISTS ") + kSchema);
  if (have_schema) url = WithQuery(url, std::string("options=-csearch_path%3D") + kSchema);
  return extra.empty() ? url : WithQuery(url, extra);
}

inline std::unique_ptr<KvEngine> MustOpen(const std::string& url) {
  auto e = OpenKvEngine(url);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Removes an environment variable for the life of the object, restoring it afterwards.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvOverride() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace tierfs::pg_test
