// One attempt of a transaction of the Redis metadata engine (redis_engine.h explains the
// design): reads under WATCH, writes buffered here, and the closing EXEC.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "meta/kv_engine.h"
#include "meta/redis_conn.h"

namespace tierfs::redis {

// How the end of an attempt went.
enum class Outcome {
  kOk,
  kConflict,   // a watched key changed: run the transaction again
  kRetry,      // nothing was committed and the server was unreachable or busy: run again
  kAmbiguous,  // the connection broke after EXEC was sent: the commit may have applied
  kFailed,     // a server error that retrying will not fix
};

struct Finish {
  Outcome outcome = Outcome::kOk;
  Status status;  // why, for kRetry, kAmbiguous and kFailed
  // A commit sent with WAIT: how many replicas acknowledged it (-1: no WAIT was sent).
  long long replicas = -1;
};

// Lives for one attempt on one connection, on the calling thread only.
class RedisTxn final : public KvTxn {
 public:
  RedisTxn(Conn& conn, const std::string& where, bool read_only)
      : conn_(conn), where_(where), read_only_(read_only) {}

  Result<std::optional<std::string>> Get(std::string_view key) override;
  Result<std::vector<std::optional<std::string>>> GetMany(const std::vector<std::string>& keys) override;
  Status Put(std::string_view key, std::string_view value) override;
  Status Delete(std::string_view key) override;
  Status Scan(std::string_view begin, std::string_view end, size_t limit,
              const ScanFn& fn) override;
  // One round trip when it is the first read of a read-only transaction: the script is
  // atomic, so the transaction needs no validation (lookup costs one round trip).
  // Otherwise the keys could not all be watched before they are read, and the default
  // (one watched Get after another) is used.
  Result<std::vector<std::optional<std::string>>> GetIndirect(const std::vector<std::string>& direct,
                                                              std::string_view indirect_prefix, size_t n,
                                                              std::string_view indirect_suffix) override;

  // One round trip: WATCHes of the keys and the prefixes' groups, then a script that reads
  // the keys and the first batch of each prefix's index atomically; later Gets and Scans of
  // exactly those find them here. Prefixes that span scan groups, and keys and prefixes
  // already read or written, are left to the reads themselves.
  Status Prefetch(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes) override;

  // Set when a read failed because the connection broke or the server was busy; the
  // callback saw an error it did not cause, so the attempt must be retried.
  const Status& unavailable() const { return unavailable_; }
  // A sticky failure (write in a read-only transaction, unexpected server error).
  const Status& error() const { return error_; }
  // Round trips that read data. One read is atomic by itself; more need validation.
  int reads() const { return reads_; }
  bool has_writes() const { return !writes_.empty(); }
  // True while WATCHes of this attempt are still active on the connection.
  bool watching() const { return watching_; }

  // Checks under the watches that nothing read has changed (an empty MULTI/EXEC).
  Finish Validate();
  // Applies the buffered writes with the commit script under the watches. marker names
  // the commit for resolving a lost EXEC reply; it expires after marker_ttl_ms. With
  // wait_replicas > 0, WAIT wait_replicas wait_ms follows EXEC in the same round trip and
  // Finish::replicas says how many replicas hold the commit. The commit is published on
  // channel (redis_watch.h).
  Finish Commit(const std::string& marker, long long marker_ttl_ms, const std::string& channel,
                int wait_replicas = 0, long long wait_ms = 0);

  class ServerRange;

 private:
  Status CheckWritable();
  // One round trip; on a transport failure or busy server records unavailable_.
  Status Exchange(const std::vector<Cmd>& cmds, std::vector<Reply>* replies);
  // Checks a reply that must not be an error; a busy server makes the attempt retry.
  Status Expect(const redisReply* r, std::string_view what);
  void AddWatch(std::vector<Cmd>* cmds, std::string_view prefix, std::string_view name);
  // Sends cmds (MULTI and what it queues) followed by EXEC (and WAIT, see Commit).
  Finish Exec(std::vector<Cmd> cmds, bool commits, int wait_replicas = 0, long long wait_ms = 0);

  Conn& conn_;
  const std::string& where_;
  const bool read_only_;
  Status unavailable_;
  Status error_;
  int reads_ = 0;
  bool watching_ = false;
  std::set<std::string, std::less<>> watched_;  // Redis keys WATCHed so far
  // What Prefetch read of a prefix's index: its first batch, and whether that was all.
  struct Prefetched {
    std::vector<std::pair<std::string, std::string>> entries;
    bool complete = false;
  };
  std::map<std::string, Prefetched, std::less<>> prefetched_;  // by prefix
  // Values read from the server, kept valid by their WATCH until EXEC.
  std::map<std::string, std::optional<std::string>, std::less<>> read_cache_;
  // Buffered writes; nullopt = delete.
  std::map<std::string, std::optional<std::string>, std::less<>> writes_;
};

}  // namespace tierfs::redis
