// Writes on a mirror (`tierfs mount MIRROR-META-URL MP --primary PRIMARY-META-URL`): the
// metadata engine a mirror's writing client runs its Meta on.
//
// Where each transaction runs:
//   - read-write: on the primary's engine, whole (its reads too), through the primary's
//     change log. It is checked against the primary's current state and conflicts with the
//     primary's other writers exactly as a primary client's would; its record then reaches
//     the mirror through the replicator like any other commit.
//   - read-only: on the mirror's engine when the mirror holds every commit this client has
//     written or seen (below), and only keys the mirror has: the logged keys
//     (change_log.h's IsLoggedKey), the format record and the mirror's state. A read of any
//     other key (sessions, locks, counters, cleanup queues, registered readers: the
//     primary's own bookkeeping, which is not replicated) stops the attempt, and the
//     transaction runs on the primary instead.
//
// What a client of it sees (the semantics, docs/design.md "Mirror volumes"):
//   - its own writes, at once: after a commit at primary sequence S, its reads go to the
//     primary until the mirror's state (read in the same transaction as the keys) says it
//     has applied S; then to the mirror again.
//   - monotonic reads: a read that ran on the primary notes the primary's last sequence in
//     the same transaction (a write the primary refused, right after it), and the mirror
//     serves this client again only once it holds that commit too, so nothing seen
//     disappears (mkdir says EEXIST, then the directory is there).
//   - other clients' writes on the primary: as the mirror applies them (its lag), unless
//     a read already went to the primary.
// The invariant it keeps (the bug it prevents): a read-only transaction answered by the
// mirror is answered by a state at or after every commit the client has observed; without
// it, `echo x > f; cat f` on a mirror read the file as it stood before the write.
//
// Threads: as the engines; the sequences are atomics shared by all threads of the client.
#pragma once

#include <memory>
#include <string_view>

#include "meta/kv_engine.h"

namespace tierfs::mirror {

// primary: the primary's engine, wrapped in its change log (WithChangeLog).
std::unique_ptr<KvEngine> ForwardWrites(std::unique_ptr<KvEngine> mirror, std::unique_ptr<KvEngine> primary);

// Whether a read of this key may be answered by the mirror (above).
bool MirrorHolds(std::string_view key);
// Whether a scan of [begin, end) may be: it stays within one kind of logged key.
bool MirrorHoldsRange(std::string_view begin, std::string_view end);

}  // namespace tierfs::mirror
