#include "client/format_volume.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <spdlog/spdlog.h>

#include "client/open.h"
#include "common/clock.h"
#include "common/secret.h"
#include "common/size.h"
#include "common/url.h"
#include "meta/kv_engine.h"
#include "object/object_store.h"
#include "tools/bucket_owner.h"

namespace tierfs::client {

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

// Returns with the engine and the store closed.
Result<Formatted> Format(const FormatOptions& a) {
  RETURN_IF_ERROR(CheckName(a.name));
  auto bs = ParseSize(a.block_size);
  if (!bs.ok()) return bs.status().With("--block-size");
  if (*bs < (64u << 10) || *bs > (16u << 20) || (*bs & (*bs - 1)) != 0) {
    return Status::Err(EINVAL, "--block-size must be a power of two between 64K and 16M, not " + a.block_size);
  }
  if (a.bucket.empty()) return Status::Err(EINVAL, "--bucket is required (for --storage file: a directory)");
  if (a.format_version < 1 || a.format_version > kFormatVersion) {
    return Status::Err(EINVAL, "--format-version must be between 1 and " + std::to_string(kFormatVersion));
  }
  if (a.session_timeout < 1 || a.session_timeout > 86400) {
    return Status::Err(EINVAL, "--session-timeout must be between 1 and 86400 seconds");
  }
  if (a.trash_days < 0 || a.trash_days > 3650) return Status::Err(EINVAL, "--trash-days must be 0 to 3650");
  if (a.changelog_hours < 0 || a.changelog_hours > 24 * 3650) {
    return Status::Err(EINVAL, "--changelog-hours must be 0 to 87600");
  }
  std::optional<int64_t> cap, inodes;
  RETURN_IF_ERROR(ParseVolumeLimits(a.capacity, a.inodes, &cap, &inodes));
  FormatRecord rec;
  rec.version = a.format_version;
  rec.storage = a.storage;
  rec.bucket = a.storage == "file" ? AbsPath(a.bucket) : a.bucket;
  RETURN_IF_ERROR(ResolveStorageCredentials(a.access_key, a.secret_key, a.session_token, a.ceph_conf, &rec));
  ASSIGN_OR_RETURN(auto engine, OpenKvEngine(a.meta_url));
  ASSIGN_OR_RETURN(auto store, CreateObjectStore(rec.Spec()));
  RETURN_IF_ERROR(store->Init());
  rec.name = a.name;
  rec.uuid = NewUuid();
  rec.block_size = static_cast<uint32_t>(*bs);
  rec.created_ns = NowNanos();
  rec.session_timeout_s = a.session_timeout;
  rec.trash_days = a.trash_days;
  rec.changelog_hours = a.changelog_hours;
  Formatted out;
  out.meta = engine->Describe();
  out.data = store->Describe();
  RETURN_IF_ERROR(Meta::Format(engine.get(), rec, a.force));
  // This engine owns the new volume's objects (tools/bucket_owner.h).
  ASSIGN_OR_RETURN(auto before, TakeBucket(engine.get(), store.get(), rec));
  if (before) {
    out.warning = rec.name + "/ in the bucket held objects of another volume named " + rec.name + " (of " +
                  before->engine + "); the new volume's blocks get other keys, and `tierfs gc --delete` will " +
                  "remove the old ones";
  }
  if (cap || inodes) {
    // The volume's limits are the root directory's quota.
    ASSIGN_OR_RETURN(auto meta, Meta::Open(std::move(engine)));
    RETURN_IF_ERROR(meta->SetQuota(QuotaKind::kDir, kRootIno, cap, inodes).With("setting --capacity/--inodes"));
  }
  out.record = rec.Redacted();
  out.record.group_secret.clear();
  return out;
}

}  // namespace

Result<Formatted> FormatVolume(const FormatOptions& options) {
  NewDatabaseFile db(options.meta_url);
  auto r = Format(options);
  if (!r.ok()) db.RemoveIfCreated();
  return r;
}

NewDatabaseFile::NewDatabaseFile(const std::string& meta_url) {
  auto url = ParseUrl(meta_url);
  if (!url.ok() || url->scheme != "sqlite3" || url->path.empty()) return;
  struct stat st;
  if (lstat(url->path.c_str(), &st) != 0 && errno == ENOENT) path_ = AbsPath(url->path);
}

void NewDatabaseFile::RemoveIfCreated() {
  if (path_.empty()) return;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::string p = path_ + suffix;
    if (unlink(p.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("cannot remove {}: {}", p, strerror(errno));
    }
  }
  path_.clear();
}

Status ParseVolumeLimits(const std::string& capacity, const std::string& inodes, std::optional<int64_t>* cap,
                         std::optional<int64_t>* n) {
  if (!capacity.empty()) {
    auto c = ParseSize(capacity);
    if (!c.ok()) return c.status().With("--capacity");
    *cap = static_cast<int64_t>(*c);
  }
  if (!inodes.empty()) {
    auto v = ParseCount(inodes);
    if (!v.ok()) return v.status().With("--inodes");
    *n = static_cast<int64_t>(*v);
  }
  return Status::OK();
}

Status ResolveStorageCredentials(const std::string& access_key, const std::string& secret_key,
                                 const std::string& session_token, const std::string& ceph_conf, FormatRecord* rec) {
  ASSIGN_OR_RETURN(std::string ak, ResolveSecret(access_key, kAccessKeyEnv));
  ASSIGN_OR_RETURN(std::string sk, ResolveSecret(secret_key, kSecretKeyEnv));
  if (!ak.empty()) rec->access_key = ak;
  if (!sk.empty()) rec->secret_key = sk;
  if (!session_token.empty()) rec->session_token = session_token;
  if (!ceph_conf.empty()) rec->ceph_conf = AbsPath(ceph_conf);
  if (rec->storage == "s3" && (rec->access_key.empty() || rec->secret_key.empty())) {
    return Status::Err(EINVAL,
                       "s3 storage needs an access key and a secret key: --access-key/--secret-key or "
                       "$TIERFS_ACCESS_KEY/$TIERFS_SECRET_KEY");
  }
  if (rec->storage == "azure" && rec->secret_key.empty()) {
    return Status::Err(EINVAL,
                       "azure storage needs the account key or a SAS token: --secret-key KEY or --secret-key "
                       "sas:TOKEN (or $TIERFS_SECRET_KEY)");
  }
  return Status::OK();
}

}  // namespace tierfs::client
