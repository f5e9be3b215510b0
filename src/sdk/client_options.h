// The options of an SDK client (tierfs.Client(meta_url, **options) in Python) by name, as
// the mount names them with "_" for "-": cache_dir, cache_size, free_space_ratio,
// mem_cache_size, cache_writes, io_timeout, buffer_size, writeback, upload_delay,
// pack_below, open_cache, attr_cache, cache_group, group_addr, no_sharing, subdir,
// read_only, metrics, atime, upload_threads, download_threads, backup_meta. Values come as
// text (Python's str() of what was given: "True", "4G", "0.5").
//
// Where an SDK client differs from a mount by default, because it lives inside someone
// else's process: no metrics endpoint (metrics="" serves one on the default address, as a
// mount does) and no metadata backups (backup_meta=3600 makes them hourly, as a mount).
#pragma once

#include <map>
#include <string>

#include "client/format_volume.h"
#include "client/volume.h"
#include "common/status.h"

namespace tierfs::sdk {

// Fills `out` (meta_url from "meta_url"); EINVAL names an unknown option or a bad value.
Status ApplyClientOptions(const std::map<std::string, std::string>& given, client::VolumeOptions* out);

// The options of tierfs.format(meta_url, name, **options), named as `tierfs format`'s:
// storage, bucket, block_size, access_key, secret_key, session_token, ceph_conf,
// session_timeout, trash_days, changelog_hours, capacity, inodes, format_version, force.
Status ApplyFormatOptions(const std::map<std::string, std::string>& given, client::FormatOptions* out);

}  // namespace tierfs::sdk
