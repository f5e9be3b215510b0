// PeerSource: the cache group as the cache hierarchy sees it (level 3, between the local
// disk and the object store). CachedStore asks it for a whole block after a miss on disk;
// the group itself (membership, ring, transport) lives in src/group/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {

class PeerSource {
 public:
  using StoreGet = std::function<Result<std::shared_ptr<const std::string>>()>;

  virtual ~PeerSource() = default;

  // The block from its owner in the group, verified (its length and its checksums).
  // ENODATA: no other member owns it (this member is the owner, or the group has no other
  // serving member): fetch it from the store and keep it. Any other error (the owner is
  // dead, slow, refused the request or sent a damaged block) also means: fetch it from the
  // store; the group never turns a good read into an error.
  // Hedging: when the owner has not answered within the group's hedge delay, `from_store`
  // runs in the calling thread and whichever answer is first is returned; *from_peer says
  // which one it was (the store's answer, error included, is returned as it is). An empty
  // from_store means a warm-up: no hedge, wait for the owner, which writes the block to its
  // disk cache before it answers (never dropping it when its fill queue is full).
  // Threads: any thread, concurrently.
  virtual Result<std::shared_ptr<const std::string>> Fetch(const std::string& key, uint32_t block_len,
                                                           const StoreGet& from_store, bool* from_peer) = 0;
};

}  // namespace tierfs
