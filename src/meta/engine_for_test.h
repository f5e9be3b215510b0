// Helpers shared by the engine and semantics tests (test code only).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/encoding.h"
#include "meta/kv_engine.h"

namespace tierfs::testing_engines {

// Shared engines run against throwaway servers that ctest starts (tests/servers.py); the
// environment names them. Returns "" when the variable is unset (the caller skips), else
// env's URL + suffix with the key space emptied.
inline std::string ServerUrl(const char* env, const std::string& suffix) {
  const char* base = getenv(env);
  if (base == nullptr || *base == '\0') return "";
  std::string url = std::string(base) + suffix;
  auto e = OpenKvEngine(url);
  if (e.ok()) {
    EXPECT_TRUE((*e)->Reset().ok());
  }
  return url;
}

inline std::string EncodeU64(uint64_t v) {
  std::string s;
  PutU64(&s, v);
  return s;
}

// Adds one to the u64 counter at key (and writes the new value to `also` when given), in
// one read-modify-write transaction: lost updates show as a short final count.
inline Status Increment(KvEngine& engine, const std::string& key, const std::string& also = "") {
  return engine.Txn([&](KvTxn& txn) -> Status {
    ASSIGN_OR_RETURN(auto current, txn.Get(key));
    uint64_t n = 0;
    if (current) {
      ByteReader r(*current);
      n = r.U64();
      if (!r.ok()) return Status::Err(EIO, "corrupt counter");
    }
    if (!also.empty()) RETURN_IF_ERROR(txn.Put(also, EncodeU64(n + 1)));
    return txn.Put(key, EncodeU64(n + 1));
  });
}

// Reads a counter written by Increment; 0 when missing, UINT64_MAX on error.
inline uint64_t ReadCounter(KvEngine& engine, const std::string& key) {
  uint64_t n = UINT64_MAX;
  Status st = engine.Txn(
      [&](KvTxn& txn) -> Status {
        ASSIGN_OR_RETURN(auto v, txn.Get(key));
        n = v ? ByteReader(*v).U64() : 0;
        return Status::OK();
      },
      /*read_only=*/true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return n;
}

}  // namespace tierfs::testing_engines
