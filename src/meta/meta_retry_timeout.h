// `--meta-retry-timeout`: one bound, for the whole process, on how long the engines on a
// server (Redis, PostgreSQL, etcd) keep retrying a metadata transaction through conflicts,
// restarts and failovers before it fails with EIO. Set, it overrides the META-URL's
// ?timeout= for every engine OpenKvEngine opens afterwards; unset (0), each URL's ?timeout=
// or the engine's default (30 s) applies. SQLite and mem engines have no server to wait
// for and ignore it.
//
// Why a process-wide setting and not an engine argument: every command opens its engines
// through OpenKvEngine(url) from many places (volume, mirror, primary, migration); one
// bound set once by the command line reaches all of them.
#pragma once

#include <chrono>

namespace tierfs {

void SetMetaRetryTimeout(std::chrono::milliseconds bound);
std::chrono::milliseconds MetaRetryTimeout();

}  // namespace tierfs
