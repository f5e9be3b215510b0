// CacheGroup: this client's membership in a cache group, and its side of the transport.
//
// Membership needs no server of its own: every member registers in its metadata session
// (SessionInfo::cache_group, group_addr, group_capacity) and reads the sessions again every
// refresh period (the session heartbeat), so joins, leaves and deaths are noticed within
// one heartbeat. A member whose heartbeat is older than member_timeout is left out.
// Members with --no-sharing read from the group and are not on the ring.
//
// Fetch (PeerSource) asks the block's owner on the ring (group/hash_ring.h) over HTTP
// (group/wire.h), and verifies the reply. An owner that has not answered within hedge_ms
// is raced by the store (the caller's GET); one that cannot be reached, or does not answer
// within request_timeout_ms, is skipped for down_ms: its blocks go to the store meanwhile,
// so a dead member costs one failed connection and a hung one a hedge delay per read until
// its request times out, never an error. Hedged asks run on a bounded pool (ask_threads):
// when every one of its threads waits on slow owners, further blocks go to the store at
// once instead of starting more threads.
//
// Threads: Fetch and members from any thread; Start/Stop from the owner's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chunk/peer_source.h"
#include "group/hash_ring.h"

namespace tierfs {

class HttpClient;
class Meta;
class ThreadPool;
struct SessionInfo;

namespace group {

struct CacheGroupOptions {
  std::string name;        // --cache-group
  std::string self_addr;   // what this member advertises; empty: not serving (--no-sharing)
  uint64_t capacity = 0;   // its cache capacity (ring weight)
  std::string volume_name, volume_uuid, secret;
  int64_t refresh_ns = 0;         // 0: the metadata heartbeat period
  int64_t member_timeout_ns = 0;  // 0: 2.5 refresh periods
  long connect_timeout_ms = 500;
  // Long, because a busy owner is waited for (a hung one is raced by the store after the
  // hedge delay instead); an ask that times out marks its owner down.
  long request_timeout_ms = 30000;
  // An owner that has not answered within this long, or 4 times the recent average
  // answer if that is longer (at most request_timeout_ms), is raced by a GET from the
  // store (a hedged read); its answer, when it comes, is dropped. An owner that answered
  // other asks within that delay is busy, not hung, and is waited for (at most
  // request_timeout_ms). 0: no hedging.
  long hedge_ms = 1000;
  int64_t down_ms = 10000;
  // Threads for asks that the store may race (and a queue as long): a hung owner holds each
  // for up to request_timeout_ms.
  int ask_threads = 16;
  // Current bytes cached by this member, published with each refresh (status shows it).
  std::function<uint64_t()> used_bytes;
};

struct GroupMember {
  uint64_t sid = 0;
  std::string host, addr, mountpoint;
  uint64_t capacity = 0, used = 0;
  bool self = false;
};

struct CacheGroupStats {
  uint64_t members = 0;       // serving members on the ring, this one included
  uint64_t asks = 0;          // blocks asked from an owner
  uint64_t received = 0;      // verified blocks received
  uint64_t unreachable = 0;   // owner down, refused the connection or timed out
  uint64_t refused = 0;       // owner answered with an error status
  uint64_t damaged = 0;       // replies that failed the MAC or a checksum
  uint64_t skipped_down = 0;  // asks not sent because the owner was marked down
  uint64_t hedged = 0;        // asks raced by the store after hedge_ms
  uint64_t ask_pool_full = 0;  // blocks sent to the store because every ask thread was busy
};

class CacheGroup : public PeerSource {
 public:
  CacheGroup(Meta* meta, CacheGroupOptions options);
  ~CacheGroup() override;
  CacheGroup(const CacheGroup&) = delete;
  CacheGroup& operator=(const CacheGroup&) = delete;

  // Publishes this member in its session and reads the group once; then Start refreshes
  // both every refresh period in the background.
  Status Refresh();
  void Start();
  void Stop();

  Result<std::shared_ptr<const std::string>> Fetch(const std::string& key, uint32_t block_len,
                                                   const StoreGet& from_store, bool* from_peer) override;

  std::vector<GroupMember> members() const;
  CacheGroupStats stats() const;
  const CacheGroupOptions& options() const { return opts_; }
  // The owner's address of a key, "" when this member owns it or the ring is empty
  // (tierfs warmup --cache-group, tests).
  std::string OwnerOf(const std::string& key) const;

 private:
  struct Ring {
    HashRing ring;
    std::vector<GroupMember> members;  // everyone in the group, readers included
  };
  std::shared_ptr<const Ring> ring() const;
  // One request to the owner, verified; warm: the owner keeps it on disk first (warm-up).
  Result<std::shared_ptr<const std::string>> Ask(const std::string& addr, const std::string& key, uint32_t block_len,
                                                 bool warm = false);
  std::chrono::milliseconds HedgeDelay() const;
  bool AnsweredWithin(const std::string& addr, std::chrono::milliseconds window);
  bool IsDown(const std::string& addr);
  void MarkDown(const std::string& addr, const std::string& why);

  Meta* const meta_;
  const CacheGroupOptions opts_;
  std::unique_ptr<HttpClient> http_;

  mutable std::mutex mu_;  // guards ring_, down_until_ms_, last_answer_ms_
  std::shared_ptr<const Ring> ring_;
  std::map<std::string, int64_t> down_until_ms_;
  std::map<std::string, int64_t> last_answer_ms_;  // last good answer per owner (monotonic)

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread refresher_;

  std::atomic<int64_t> answer_us_{0};  // moving average of good answers
  std::atomic<uint64_t> asks_{0}, received_{0}, unreachable_{0}, refused_{0}, damaged_{0}, skipped_down_{0}, hedged_{0},
      ask_pool_full_{0};

  // Hedged asks; declared last, so its threads are joined before what they use goes.
  std::unique_ptr<ThreadPool> ask_pool_;
};

// The address this host uses to reach `target_host` (for example the metadata server), as
// the default address a member advertises; "127.0.0.1" when it cannot be found.
std::string LocalAddressToward(const std::string& target_host);

}  // namespace group
}  // namespace tierfs
