// The metadata engine interface: an ordered key-value store with transactions.
//
// The POSIX semantics layer (meta.h) is written once over this interface; engines
// (memory, SQLite, Redis, PostgreSQL) only supply these primitives. Keys and
// values are arbitrary bytes; keys compare as unsigned byte strings.
#pragma once

#include <cerrno>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tierfs {

// One transaction. Reads see the transaction's own writes. Only valid inside the callback
// passed to KvEngine::Txn and only on the calling thread.
class KvTxn {
 public:
  virtual ~KvTxn() = default;
  virtual Result<std::optional<std::string>> Get(std::string_view key) = 0;
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  virtual Status Delete(std::string_view key) = 0;
  // Visits keys in [begin, end) in ascending order until fn returns false or limit keys
  // were visited (limit 0 = no limit).
  // Reads every key of `direct`, then the key indirect_prefix + v[0, n) + indirect_suffix,
  // where v is the value of the last direct key (nothing when v is absent or shorter than
  // n). Returns the direct values followed by the indirect one. The default reads the
  // direct keys with one GetMany, then the indirect one: two round trips on the engines
  // that batch reads; engines that can read the chain in one round trip override it
  // (lookup: parent attributes, entry, then the child's attributes).
  virtual Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                                      std::string_view indirect_prefix, size_t n,
                                                                      std::string_view indirect_suffix);
  // The values of many keys (in the order asked; a key may repeat), as Get would return
  // them one by one. The default does one Get after another; engines whose Get is a round
  // trip, or a statement with its own set-up, read them in one go (a listing page reads the
  // attributes and an xattr of a thousand entries).
  virtual Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys);
  // A hint that the transaction is about to read `keys` and scan each of `prefixes` whole
  // ([p, PrefixEnd(p))). Engines whose reads are round trips read them all in one and serve
  // those reads from what they got (Redis: an open reads the attributes and the first
  // chunk's map in one round trip, not four). The default does nothing; the reads that
  // follow are what count, and see the transaction's own writes as always.
  virtual Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) {
    (void)keys;
    (void)prefixes;
    return Status::OK();
  }
  using ScanFn = std::function<bool(std::string_view key, std::string_view value)>;
  virtual Status Scan(std::string_view begin, std::string_view end, size_t limit, const ScanFn& fn) = 0;
};

// How the engine's servers keep an acknowledged commit, read from them when asked (`tierfs
// status`, `mount --require-safe-meta`). safe: no single server's or machine's loss can
// lose one. risks: what such a loss could lose, each naming the setting that decides it.
struct DurabilityReport {
  bool safe = false;
  std::string summary;  // one line: "3 etcd members, 3 voting"
  std::vector<std::string> risks;
};

class KvEngine {
 public:
  virtual ~KvEngine() = default;
  // "sqlite3:///path" etc., without secrets.
  virtual std::string Describe() const = 0;
  // Runs fn in a transaction and commits if fn returns OK; otherwise rolls back and
  // returns fn's status. On a conflict with another transaction (another thread or
  // process) the engine rolls back and runs fn again, with bounded backoff, so fn must
  // have no side effects outside the transaction. read_only transactions must not write.
  virtual Status Txn(const std::function<Status(KvTxn&)>& fn, bool read_only = false) = 0;
  // Removes every key (used by tests and `format --force`).
  virtual Status Reset() = 0;
  // Makes every committed transaction durable against a power loss (fsync). Engines on a
  // server leave durability to the server's own configuration.
  virtual Status Sync() { return Status::OK(); }
  // See DurabilityReport. Engines that cannot tell say so (not safe).
  virtual Result<DurabilityReport> Durability() {
    return DurabilityReport{false, "unknown", {"this metadata engine cannot say how it keeps a commit"}};
  }
  // Change notification, from engines that can push it (etcd's watch). Once started,
  // on_change is called from a thread of the engine's own with the keys that committed
  // transactions of any client (this one included) wrote or deleted, in commit order, soon
  // after each commit; with all set (keys empty) when changes may have been missed (the
  // stream was lost, or the history it resumed from was compacted): the caller must then
  // treat everything as changed. The callback must not run transactions on this engine.
  // A null on_change stops the watch and returns after the last call ended. ENOTSUP from
  // engines that cannot watch; one watcher per engine.
  using WatchFn = std::function<void(const std::vector<std::string>& keys, bool all)>;
  virtual Status Watch(WatchFn on_change) {
    (void)on_change;
    return Status::Err(ENOTSUP, Describe() + " cannot push changes");
  }
};

// Opens an engine from a META-URL: "mem://name", "sqlite3://PATH",
// "redis://[USER:PASSWORD@]HOST:PORT/DB", "postgres://USER:PASSWORD@HOST:PORT/DB",
// "etcd://[USER:PASSWORD@]HOST1:PORT,HOST2:PORT,.../PREFIX". A
// password missing from the URL comes from $TIERFS_META_PASSWORD or the file named by
// $TIERFS_META_PASSWORD_FILE. Errors never include the password.
// A sqlite3:// database file that does not exist is created with kCreate (format, load,
// tests) and refused with ENOENT naming the path with kMustExist (commands that need a
// volume: a typo must not leave an empty database behind).
enum class MissingDatabase { kCreate, kMustExist };
Result<std::unique_ptr<KvEngine>> OpenKvEngine(const std::string& meta_url,
                                               MissingDatabase missing = MissingDatabase::kCreate);

// The smallest key greater than every key starting with prefix ("" when none exists).
std::string PrefixEnd(std::string_view prefix);

}  // namespace tierfs
