// A mount's or cache server's part in a cache group: the options (--cache-group,
// --group-addr, --no-sharing), its listener and its membership (src/group/), wired into
// its CachedStore.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {
class CachedStore;
class Meta;
namespace group {
class CacheGroup;
class PeerServer;
}  // namespace group
}  // namespace tierfs

namespace tierfs::client {

struct GroupArgs {
  std::string name;        // --cache-group; empty: no group
  std::string addr;        // --group-addr HOST:PORT; empty: this host's address, an ephemeral port
  bool no_sharing = false;  // --no-sharing
};

class GroupRuntime {
 public:
  ~GroupRuntime();
  // Stops serving other members and refreshing the membership, the two things that use
  // the CachedStore (its blocks; its cache sizes, published with each refresh): call it
  // before that store goes away. Asks to other members (a prefetch of the store still
  // running) keep working until destruction, which comes after the store's.
  void Stop();
  group::CacheGroup* group() { return group_.get(); }
  group::PeerServer* server() { return server_.get(); }
  // The group's state and counters as a JSON object (tierfs.stats).
  std::string StatsJson() const;

 private:
  friend Result<std::unique_ptr<GroupRuntime>> JoinGroup(const GroupArgs&, const std::string&, Meta*, CachedStore*);
  std::unique_ptr<group::PeerServer> server_;
  std::unique_ptr<group::CacheGroup> group_;
};

// Starts the listener (unless --no-sharing), registers the member in its session (which
// must exist) and reads the group; then refreshes it every heartbeat. The caller keeps the
// result alive until after `store` is destroyed, and calls Stop before that (and before
// the session closes: a refresh writes to it).
Result<std::unique_ptr<GroupRuntime>> JoinGroup(const GroupArgs& args, const std::string& meta_url, Meta* meta,
                                                CachedStore* store);

}  // namespace tierfs::client
