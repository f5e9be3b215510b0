// Ceph RADOS object storage backend (librados).
//
// StorageSpec fields: bucket = pool name; access_key = Ceph client name ("" or "admin" mean
// client.admin, a name without "client." gets it prepended); ceph_conf = path of ceph.conf
// ("" = $CEPH_CONF, else Ceph's default search: /etc/ceph/ceph.conf, ~/.ceph/config,
// ./ceph.conf). The keyring and monitor addresses come from that configuration; CEPH_ARGS is
// honoured as by the ceph tools. Object keys are RADOS object names verbatim, in the pool's
// default namespace.
//
// Connection: made on first use (Init or any operation), so that creating a store never
// blocks; a failed attempt is retried by the next call. Ceph's own defaults would let an
// unreachable cluster hang a call for 5 minutes (connect) or forever (operations); unless
// ceph.conf sets them to something else, client_mount_timeout is 10 s, rados_mon_op_timeout
// 30 s and rados_osd_op_timeout the store's io timeout (StorageSpec::io_timeout_s, `mount
// --io-timeout`, 60 s by default: long enough to ride out the ~25 s it takes Ceph to mark a
// dead OSD down and remap its placement groups); the first two never exceed it.
//
// Init() creates the pool when it is missing and the client may (ENOENT "pool X does not
// exist" otherwise), and proves it writable with a probe object.
//
// Put/PutParts use write_full: an object is replaced atomically, readers see the old or the
// new contents. Objects are limited by the cluster's osd_max_write_size (90 MiB by default);
// larger objects need multipart.
//
// List: RADOS lists a pool in hash order, without a prefix filter. The store lists the whole
// pool once per pass (a call with an empty start_after), keeps the sorted keys that match the
// prefix, and serves the following pages (start_after advancing) from that snapshot, with
// size and mtime fetched by concurrent stats of just the page's keys. Objects deleted since
// the snapshot are skipped; objects created after it are not seen until the next pass (gc
// ignores young objects anyway). See SnapshotCache in rados_store.cc.
//
// Multipart: RADOS has none, so it is emulated in the namespace "tierfs.multipart" of the same
// pool, which List never shows: a marker object ID (xattr "key" = the target key, one xattr
// per uploaded part), parts ID/N, and on completion the parts are concatenated into ID/all,
// which is then server-side copied (copy_from, atomic) onto the key; everything under ID is
// removed afterwards. Uploads interrupted by a crash leave objects in that namespace behind.
// On erasure-coded pools multipart needs allow_ec_overwrites (parts are written at offsets).
//
// Errors: ENOENT for a missing object (message names pool and key) and, from Init, a missing
// pool; EACCES for permission errors (with the caps the client needs); EINVAL for invalid
// keys, upload ids and part numbers; EIO for everything else with librados's message,
// including an unreachable cluster (never ENOENT, so that a reader never mistakes an outage
// for a missing block).
//
// Threads: every method may be called from any thread concurrently; one cluster handle and
// its I/O contexts are shared (librados is thread-safe).
#pragma once

#include <memory>

#include "object/object_store.h"

namespace tierfs {

Result<std::unique_ptr<ObjectStore>> NewRadosStore(const StorageSpec& spec);

// Deletes the pool spec.bucket and everything in it (tests and tooling). Needs the monitors
// to allow it (mon_allow_pool_delete) and the client to hold 'mon allow *'-like caps.
// Deleting a missing pool succeeds.
Status DeleteRadosPool(const StorageSpec& spec);

}  // namespace tierfs
