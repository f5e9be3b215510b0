// What a `tierfs sync` argument names, and the side it opens:
//   /path, ./path, path           a local or mounted directory
//   http(s)://[AK:SK@]HOST[:PORT]/BUCKET[/PREFIX]   an S3 bucket (path style)
//   azure+http(s)://HOST[:PORT]/ACCOUNT/CONTAINER[/PREFIX], https://ACCOUNT.blob.core.windows.net/CONTAINER[/PREFIX]
//                                 an Azure Blob container
//   rados://POOL[/PREFIX]         a RADOS pool ($CEPH_CONF or --*-ceph-conf)
//   file:///DIR[/]                a file store's directory (objects as files)
//   META-URL:/PATH                a directory of a TierFS volume (sqlite3://, redis://,
//                                 rediss://, postgres://, postgresql://), e.g.
//                                 sqlite3:///srv/vol.db:/datasets/; without ":/PATH" the root
// Credentials for stores: --src-/--dst- options, else the URL's user info, else
// $TIERFS_SRC_ACCESS_KEY / $TIERFS_SRC_SECRET_KEY (DST for the destination), else
// $TIERFS_ACCESS_KEY / $TIERFS_SECRET_KEY (each also as a _FILE variable, common/secret.h).
#pragma once

#include <memory>
#include <string>

#include "client/volume.h"
#include "sync/side.h"
#include "sync/store_side.h"

namespace tierfs::sync {

struct SideArgs {
  std::string url;
  std::string access_key, secret_key, session_token, ceph_conf;
  std::string env_prefix;  // "TIERFS_SRC_" or "TIERFS_DST_"
  int io_timeout_s = 60;
  client::VolumeOptions volume;  // caches and buffers for a volume side (meta_url is set here)
  StoreSideOptions store;
};

enum class SideKind { kDir, kStore, kVolume };

// Which kind the URL names (no I/O).
SideKind KindOf(const std::string& url);

// Opens the side; a destination is created where that makes sense (directory, volume
// path, bucket). Errors say which argument is wrong and how.
// dry_run: a destination is not created; a missing directory lists as empty.
Result<std::unique_ptr<Side>> OpenSide(const SideArgs& args, bool destination, bool dry_run = false);

}  // namespace tierfs::sync
