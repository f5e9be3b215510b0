// The KvTxn of the PostgreSQL engine: one transaction on one pipelined connection.
//
// BEGIN is queued with the first statement; Put and Delete are queued and reach the server
// with the next read (Get, a Scan batch) or with COMMIT, so reads always see the
// transaction's own writes. A failure of a queued write therefore surfaces at a later
// call or at commit; either way the transaction does not commit.
//
// The first failure is sticky: every later call returns it, and the engine reads it back
// (error()) to decide between running the transaction again (conflict, lost connection)
// and failing, even if the callback ignored it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meta/kv_engine.h"
#include "meta/postgres_conn.h"

namespace tierfs::pg {

class Txn final : public KvTxn {
 public:
  Txn(Conn& conn, bool read_only) : c_(conn), read_only_(read_only) {}

  Result<std::optional<std::string>> Get(std::string_view key) override;
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;
  Status Scan(std::string_view begin, std::string_view end, size_t limit,
              const ScanFn& fn) override;
  // One round trip for the keys and the first batch of each prefix (open: attributes and
  // chunk 0's map in one instead of three); the Gets and whole-prefix Scans that follow
  // are answered from it until the transaction writes.
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override;

  // Whether BEGIN was queued (the connection is inside a transaction).
  bool begun() const { return begun_; }
  // Whether a Put or Delete was queued.
  bool wrote() const { return wrote_; }
  const Status& error() const { return error_; }

 private:
  void Begin();
  // Forgets what Prefetch read (a write may have changed it).
  void DropPrefetched() {
    if (!got_.empty()) got_.clear();
    if (!scanned_.empty()) scanned_.clear();
  }
  Status CheckWritable();
  Status RoundTrip();
  Status Fail(Status st);

  Conn& c_;
  const bool read_only_;
  bool begun_ = false;
  bool wrote_ = false;
  Status error_;
  std::vector<ResultPtr> results_;
  std::map<std::string, std::optional<std::string>, std::less<>> got_;  // Prefetch's keys
  std::map<std::string, ResultPtr, std::less<>> scanned_;               // Prefetch's prefixes
};

}  // namespace tierfs::pg
