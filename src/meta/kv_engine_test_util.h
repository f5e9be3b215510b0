// What the KvEngine tests share (kv_engine_test.cc: the contract every engine keeps, typed
// over every engine; kv_engine_open_test.cc: opening URLs and what is engine-specific):
// a temporary directory and one-transaction helpers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meta/engine_for_test.h"
#include "meta/kv_engine.h"

namespace tierfs::kv_test {

using testing_engines::EncodeU64;
using testing_engines::Increment;
using testing_engines::ReadCounter;
using testing_engines::ServerUrl;

namespace fs = std::filesystem;
using KvList = std::vector<std::pair<std::string, std::string>>;

// A fresh directory, removed with its contents at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& base = "") {
    std::string root = base;
    if (root.empty()) {
      const char* tmp = getenv("TMPDIR");
      root = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string templ = root + "/tierfs-kv-test-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    char* made = mkdtemp(buf.data());
    if (made == nullptr) {
      ADD_FAILURE() << "mkdtemp in " << root << " failed";
      return;
    }
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

inline std::optional<std::string> GetCommitted(KvEngine& engine, std::string_view key) {
  std::optional<std::string> out;
  Status st = engine.Txn(
      [&](KvTxn& txn) -> Status {
        ASSIGN_OR_RETURN(out, txn.Get(key));
        return Status::OK();
      },
      /*read_only=*/true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

inline Status PutCommitted(KvEngine& engine, std::string_view key, std::string_view value) {
  return engine.Txn([&](KvTxn& txn) { return txn.Put(key, value); });
}

inline KvList ScanCommitted(KvEngine& engine, std::string_view begin, std::string_view end,
                     size_t limit = 0) {
  KvList out;
  Status st = engine.Txn(
      [&](KvTxn& txn) {
        out.clear();
        return txn.Scan(begin, end, limit, [&](std::string_view k, std::string_view v) {
          out.emplace_back(k, v);
          return true;
        });
      },
      /*read_only=*/true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

inline std::vector<std::string> Keys(const KvList& list) {
  std::vector<std::string> keys;
  for (const auto& kv : list) keys.push_back(kv.first);
  return keys;
}

inline std::string NumKey(int i) {
  char buf[32];
  snprintf(buf, sizeof(buf), "n/%06d", i);
  return buf;
}

}  // namespace tierfs::kv_test
