// One attempt of a transaction on the etcd engine (etcd_engine.h: layout, retries, commit).
//
// Reads are all at one revision of the store: the one the attempt's first read was served
// at (linearizable), then every later read asks for that revision, served by the member
// asked without a round of the cluster (serializable: that member has applied the
// revision, or answers ESTALE and the attempt starts again). The attempt thus reads a
// snapshot, so a read-only transaction is consistent whatever its number of round trips
// and needs no validation. A Get is one Range; GetMany one etcd Txn of Range ops per
// max_txn_ops keys; a Scan one Range per kScanBatch keys. Values read are kept for the
// attempt, and buffered writes are merged into every read.
//
// Validation, at commit (Compares): the commit applies only if nothing it read changed
// after the snapshot:
//   - each key read (by Get, GetMany or a Scan that returned it): its mod revision equals
//     the one read (0 for a key that was absent): catches a change, a creation, a deletion;
//   - each range a Scan covered, up to where it stopped: the mod revision of every key in
//     it is below snapshot + 1: catches a key created in it (and a change, again);
//   - when that makes more compares than the cluster's --max-txn-ops allows (max_txn_ops
//     less two for the commit marker), one compare instead: the global version key, which
//     every commit writes, unchanged since the snapshot. Correct, but such a transaction
//     conflicts with every concurrent commit; only those that read thousands of keys and
//     write (rmr batches, fsck repairs) pay it.
// A transaction that writes without reading commits without compares (a blind write).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meta/etcd_client.h"
#include "meta/etcd_options.h"
#include "meta/kv_engine.h"

namespace tierfs::etcd {

class EtcdTxn final : public KvTxn {
 public:
  EtcdTxn(Client& client, const Options& options, bool read_only);

  Result<std::optional<std::string>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override;
  Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) override;

  bool has_writes() const { return !writes_.empty(); }
  // The first error a read met (the cluster unavailable, the snapshot compacted away), or
  // EROFS for a write in a read-only transaction: the attempt is void whatever the
  // callback made of it.
  const Status& error() const { return error_; }
  // What the commit compares and writes (the global version key included).
  std::vector<Compare> Compares() const;
  std::vector<Op> WriteOps() const;

  // The etcd key of a TierFS key, and the global version key.
  static std::string ValueKey(const Options& o, std::string_view key);
  static std::string VersionKey(const Options& o);

 private:
  Status Fail(Status st);
  void Snapshot(int64_t revision) {
    if (rev_ == 0) rev_ = revision;
  }
  std::optional<std::string> Remember(const std::string& key, const Kv* kv);

  Client& c_;
  const Options& o_;
  const bool read_only_;
  int64_t rev_ = 0;  // the snapshot (0: nothing read yet)
  Status error_;
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;  // by TierFS key
  std::map<std::string, std::optional<std::string>, std::less<>> read_;    // by TierFS key
  std::map<std::string, int64_t> mods_;                                    // etcd key -> mod revision read
  std::vector<std::pair<std::string, std::string>> ranges_;                // etcd [begin, end) scanned
};

}  // namespace tierfs::etcd
