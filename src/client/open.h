// Opening what a client of a volume uses: its metadata engine and volume, its object store,
// and the session record that names this process. Every front end (mount, cache server,
// gateway) and the one-shot subcommands open them through here.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace tierfs {
class Meta;
class ObjectStore;
struct FormatRecord;
struct SessionInfo;
}  // namespace tierfs

namespace tierfs::client {

// Opens the engine at meta_url and the volume in it (a sqlite3:// file must exist: only
// format and load create one).
// dir_attr_cache_ns: see MetaOptions (0 for tools that must always read the engine).
Result<std::unique_ptr<Meta>> OpenVolume(const std::string& meta_url, bool read_only, int64_t dir_attr_cache_ns = 0);

// Opens the mirror volume at mirror_url for reading and writing through its primary at
// primary_url (mirror/forward_writes.h): EINVAL when mirror_url is no mirror, or
// primary_url is not the volume it follows or keeps no change log.
Result<std::unique_ptr<Meta>> OpenMirrorWriter(const std::string& mirror_url, const std::string& primary_url,
                                               int64_t dir_attr_cache_ns = 0);

// Opens the object store a volume's format record describes, with TIERFS_ACCESS_KEY and
// TIERFS_SECRET_KEY (or TIERFS_SECRET_KEY_FILE) overriding the stored credentials.
// sync_puts: see StorageSpec::sync_puts (only `mount --no-sync-blocks` turns it off);
// io_timeout_s: StorageSpec::io_timeout_s (0: its default). free_space_ratio: for a `file`
// bucket, the share of its disk kept free (mount --bucket-free-space-ratio); other commands
// write little and keep none.
// writes_to_primary: a mirror with a store of its own writes blocks to its primary's store
// too (mirror/forward_writes.h; ReadThroughStore's WriteBoth).
Result<std::unique_ptr<ObjectStore>> OpenStore(const FormatRecord& format, bool sync_puts = true, int io_timeout_s = 0,
                                               double free_space_ratio = 0, bool writes_to_primary = false);

// The session record of this process (host, pid, version) for a client serving `label`:
// a mount point, "s3://ADDR" for a gateway, "" for a cache server.
SessionInfo ThisProcessSession(const std::string& label);

// Absolute, normalized path (the path need not exist).
std::string AbsPath(const std::string& path);

}  // namespace tierfs::client
