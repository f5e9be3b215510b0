// Test-only: a KvTxn that forwards to another and notes whether the transaction scanned
// (slice map reads scan a chunk's records). Used by engines in tests that must act right
// after a layout read (vfs_test, file_reader_test).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meta/kv_engine.h"

namespace tierfs::testing {

class ScanSpy : public KvTxn {
 public:
  ScanSpy(KvTxn& t, bool* scanned) : t_(t), scanned_(scanned) {}
  Result<std::optional<std::string>> Get(std::string_view key) override { return t_.Get(key); }
  Status Put(std::string_view key, std::string_view value) override { return t_.Put(key, value); }
  Status Delete(std::string_view key) override { return t_.Delete(key); }
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view prefix, size_t n,
                                                              std::string_view suffix) override {
    return t_.GetIndirect(direct, prefix, n, suffix);
  }
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override {
    *scanned_ = true;
    return t_.Scan(begin, end, limit, fn);
  }

 private:
  KvTxn& t_;
  bool* scanned_;
};

}  // namespace tierfs::testing
