// tierfs format META-URL NAME --storage file --bucket DIR [--block-size 4M] [--force]
#include <CLI/CLI.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/clock.h"
#include "common/size.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "tools/bucket_owner.h"
#include "object/object_store.h"

namespace tierfs::cmd {
namespace {

std::string NewUuid() {
  unsigned char b[16];
  std::ifstream r("/dev/urandom", std::ios::binary);
  r.read(reinterpret_cast<char*>(b), sizeof b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  std::ostringstream o;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) o << '-';
    o << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(b[i]);
  }
  return o.str();
}

Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > 63) return Status::Err(EINVAL, "volume name must be 1 to 63 characters");
  for (char c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return Status::Err(EINVAL, "volume name '" + name + "' may only contain letters, digits, '-' and '_'");
    }
  }
  return Status::OK();
}

struct Args {
  std::string meta_url, name, storage = "file", bucket, block_size = "4M";
  std::string access_key, secret_key, session_token, ceph_conf;
  int session_timeout = 60;
  int trash_days = 1;
  int changelog_hours = 0;
  std::string capacity, inodes;
  int format_version = kFormatVersion;
  bool force = false;
};

// Returns with the engine and the store closed.
int Format(const Args& a) {
  Status st = CheckName(a.name);
  if (!st.ok()) return Fail("format", st);
  auto bs = ParseSize(a.block_size);
  if (!bs.ok()) return Fail("format", bs.status().With("--block-size"));
  if (*bs < (64u << 10) || *bs > (16u << 20) || (*bs & (*bs - 1)) != 0) {
    return Fail("format", Status::Err(EINVAL, "--block-size must be a power of two between 64K and 16M, not " +
                                                  a.block_size));
  }
  if (a.bucket.empty()) return Fail("format", Status::Err(EINVAL, "--bucket is required (for --storage file: a directory)"));
  std::string bucket = a.storage == "file" ? AbsPath(a.bucket) : a.bucket;
  if (a.format_version < 1 || a.format_version > kFormatVersion) {
    return Fail("format", Status::Err(EINVAL, "--format-version must be between 1 and " +
                                                  std::to_string(kFormatVersion)));
  }
  FormatRecord rec;
  rec.version = a.format_version;
  rec.storage = a.storage;
  rec.bucket = bucket;
  st = ResolveStorageCredentials(a.access_key, a.secret_key, a.session_token, a.ceph_conf, &rec);
  if (!st.ok()) return Fail("format", st);
  auto engine = OpenKvEngine(a.meta_url);
  if (!engine.ok()) return Fail("format", engine.status());
  auto store = CreateObjectStore(rec.Spec());
  if (!store.ok()) return Fail("format", store.status());
  st = (*store)->Init();
  if (!st.ok()) return Fail("format", st);
  rec.name = a.name;
  rec.uuid = NewUuid();
  rec.block_size = static_cast<uint32_t>(*bs);
  rec.created_ns = NowNanos();
  if (a.session_timeout < 1 || a.session_timeout > 86400) {
    return Fail("format", Status::Err(EINVAL, "--session-timeout must be between 1 and 86400 seconds"));
  }
  rec.session_timeout_s = a.session_timeout;
  if (a.trash_days < 0 || a.trash_days > 3650) return Fail("format", Status::Err(EINVAL, "--trash-days must be 0 to 3650"));
  rec.trash_days = a.trash_days;
  if (a.changelog_hours < 0 || a.changelog_hours > 24 * 3650) {
    return Fail("format", Status::Err(EINVAL, "--changelog-hours must be 0 to 87600"));
  }
  rec.changelog_hours = a.changelog_hours;
  std::optional<int64_t> cap, inodes;
  st = ParseVolumeLimits(a.capacity, a.inodes, &cap, &inodes);
  if (!st.ok()) return Fail("format", st);
  const std::string meta_desc = (*engine)->Describe();
  st = Meta::Format(engine->get(), rec, a.force);
  if (!st.ok()) return Fail("format", st);
  // This engine owns the new volume's objects (tools/bucket_owner.h).
  auto before = TakeBucket(engine->get(), store->get(), rec);
  if (!before.ok()) return Fail("format", before.status());
  if (*before) {
    std::cerr << "tierfs format: warning: " << rec.name << "/ in the bucket held objects of another volume named "
              << rec.name << " (of " << (*before)->engine << "); the new volume's blocks get other keys, and "
              << "`tierfs gc --delete` will remove the old ones" << std::endl;
  }
  if (cap || inodes) {
    // The volume's limits are the root directory's quota.
    auto meta = Meta::Open(std::move(*engine));
    if (!meta.ok()) return Fail("format", meta.status());
    st = (*meta)->SetQuota(QuotaKind::kDir, kRootIno, cap, inodes);
    if (!st.ok()) return Fail("format", st.With("setting --capacity/--inodes"));
  }
  std::cout << "formatted volume " << rec.name << " (uuid " << rec.uuid << ")\n"
            << "  metadata: " << meta_desc << "\n"
            << "  data:     " << (*store)->Describe() << "\n"
            << "  block size: " << FormatSize(rec.block_size) << std::endl;
  return 0;
}

int Run(const Args& a) {
  // A format that fails (an unusable bucket, an invalid setting) leaves no database file
  // behind, unless the file was there before.
  NewDatabaseFile db(a.meta_url);
  int rc = Format(a);
  if (rc != 0) db.RemoveIfCreated();
  return rc;
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
