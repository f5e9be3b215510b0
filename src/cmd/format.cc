// tierfs format META-URL NAME --storage file --bucket DIR [--block-size 4M] [--force]
#include <CLI/CLI.hpp>
#include <iostream>

#include "client/format_volume.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"

namespace tierfs::cmd {
namespace {

using Args = client::FormatOptions;

int Run(const Args& a) {
  auto r = client::FormatVolume(a);
  if (!r.ok()) return Fail("format", r.status());
  if (!r->warning.empty()) std::cerr << "tierfs format: warning: " << r->warning << std::endl;
  std::cout << "formatted volume " << r->record.name << " (uuid " << r->record.uuid << ")\n"
            << "  metadata: " << r->meta << "\n"
            << "  data:     " << r->data << "\n"
            << "  block size: " << FormatSize(r->record.block_size) << std::endl;
  return 0;
}

}  // namespace

void RegisterFormat(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("format", "Create a volume: metadata in META-URL, data in the object store");
  sub->add_option("META-URL", args->meta_url, "Metadata engine, e.g. sqlite3:///var/lib/tierfs/vol.db")->required();
  sub->add_option("NAME", args->name, "Volume name (letters, digits, - and _)")->required();
  sub->add_option("--storage", args->storage, "Object storage type: file, s3, rados or azure (mem: tests only)")
      ->capture_default_str();
  sub->add_option("--bucket", args->bucket,
                  "file: the directory holding the blocks; s3: http(s)://HOST:PORT/BUCKET or "
                  "http(s)://BUCKET.HOST (created if missing); rados: the pool; azure: "
                  "https://ACCOUNT.blob.core.windows.net/CONTAINER or http(s)://HOST:PORT/ACCOUNT/CONTAINER "
                  "(created if missing)");
  AddCredentialOptions(sub, &args->access_key, &args->secret_key, &args->session_token, &args->ceph_conf);
  sub->add_option("--block-size", args->block_size, "Block size, a power of two from 64K to 16M")
      ->capture_default_str();
  sub->add_option("--session-timeout", args->session_timeout,
                  "Seconds without heartbeat after which a client counts as dead and its locks and "
                  "open-unlinked files are reclaimed")
      ->capture_default_str();
  sub->add_option("--trash-days", args->trash_days,
                  "Days removed files stay in MOUNTPOINT/.trash before their data is deleted (0: no trash)")
      ->capture_default_str();
  sub->add_option("--changelog-hours", args->changelog_hours,
                  "Keep a change log of the namespace for this many hours (read by `tierfs changelog` and by "
                  "incremental `tierfs sync --changes` from the volume; 0: no change log)")
      ->capture_default_str();
  sub->add_option("--capacity", args->capacity, "Bytes the volume may hold (e.g. 100T; default: no limit)");
  sub->add_option("--inodes", args->inodes, "Files and directories the volume may hold (default: no limit)");
  sub->add_option("--format-version", args->format_version,
                  "1 lets clients older than tierfs 0.2 mount the volume; 2 keeps checksum tables in S3 or "
                  "Azure object metadata, so that each block is one object of exactly its size (faster on Ceph's "
                  "radosgw); 3 also lets clients pack small files (mount --writeback --pack-below) and needs tierfs 0.3")
      ->capture_default_str();
  sub->add_flag("--force", args->force, "Erase an existing volume in META-URL and format anew");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
