#include "client/open.h"

#include <unistd.h>

#include <filesystem>

#include "common/secret.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/read_through_store.h"
#include "chunk/block_key.h"
#include "meta/change_log.h"
#include "meta/timed_engine.h"
#include "mirror/forward_writes.h"
#include "object/object_store.h"

namespace tierfs::client {

Result<std::unique_ptr<Meta>> OpenVolume(const std::string& meta_url, bool read_only, int64_t dir_attr_cache_ns) {
  ASSIGN_OR_RETURN(auto engine, OpenKvEngine(meta_url, MissingDatabase::kMustExist));
  engine = WithTxnMetrics(std::move(engine));
  MetaOptions opts;
  opts.read_only = read_only;
  opts.dir_attr_cache_ns = dir_attr_cache_ns;
  return Meta::Open(std::move(engine), opts);
}

Result<std::unique_ptr<Meta>> OpenMirrorWriter(const std::string& mirror_url, const std::string& primary_url,
                                               int64_t dir_attr_cache_ns) {
  ASSIGN_OR_RETURN(auto mirror, OpenKvEngine(mirror_url, MissingDatabase::kMustExist));
  ASSIGN_OR_RETURN(FormatRecord mf, Meta::ReadFormat(mirror.get()));
  if (mf.mirror_of.empty()) {
    return Status::Err(EINVAL, "--primary: volume " + mf.name + " at " + mirror->Describe() +
                                   " is not a mirror; mount it without --primary");
  }
  auto primary = OpenKvEngine(primary_url, MissingDatabase::kMustExist);
  if (!primary.ok()) return primary.status().With("--primary (the primary of mirror " + mf.name + ")");
  auto pf = Meta::ReadFormat(primary->get());
  if (!pf.ok()) return pf.status().With("--primary " + (*primary)->Describe());
  if (pf->uuid != mf.uuid || !pf->mirror_of.empty()) {
    return Status::Err(EINVAL, "--primary " + (*primary)->Describe() + " holds volume " + pf->name + " (" + pf->uuid +
                                   "), not the one mirror " + mf.name + " follows (" + mf.uuid + ", " + mf.mirror_of +
                                   ")");
  }
  if (pf->changelog_hours == 0) {
    return Status::Err(EINVAL, "--primary " + (*primary)->Describe() +
                                   " keeps no change log: the mirror would never see what this client writes");
  }
  auto engine = mirror::ForwardWrites(WithTxnMetrics(std::move(mirror)),
                                      WithChangeLog(WithTxnMetrics(std::move(*primary))));
  MetaOptions opts;
  opts.dir_attr_cache_ns = dir_attr_cache_ns;
  opts.engine_logs_changes = true;
  return Meta::Open(std::move(engine), opts);
}

Result<std::unique_ptr<ObjectStore>> OpenStore(const FormatRecord& format, bool sync_puts, int io_timeout_s,
                                               double free_space_ratio, bool writes_to_primary) {
  StorageSpec spec = format.Spec();
  spec.sync_puts = sync_puts;
  if (io_timeout_s > 0) spec.io_timeout_s = io_timeout_s;
  spec.free_space_ratio = free_space_ratio;
  ASSIGN_OR_RETURN(std::string ak, ResolveSecret("", kAccessKeyEnv));
  ASSIGN_OR_RETURN(std::string sk, ResolveSecret("", kSecretKeyEnv));
  if (!ak.empty()) spec.access_key = ak;
  if (!sk.empty()) spec.secret_key = sk;
  ASSIGN_OR_RETURN(auto store, CreateObjectStore(spec));
  if (format.source_storage.empty()) return store;
  // A mirror with a store of its own: a block not copied yet is read from the primary's.
  StorageSpec source = format.SourceSpec();
  source.sync_puts = sync_puts;
  source.io_timeout_s = spec.io_timeout_s;
  auto second = CreateObjectStore(source);
  if (!second.ok()) return second.status().With("the primary's store of mirror " + format.name);
  // Blocks and packs only: the volume's other objects (its bucket-owner record) are each
  // store's own.
  return WithReadThrough(std::move(store), std::move(*second), [](const std::string& key) {
    std::string volume;
    uint64_t id;
    uint32_t index, len;
    return ParseBlockKey(key, &volume, &id, &index, &len) || ParsePackKey(key, &volume, &id, &len);
  }, writes_to_primary ? WriteBoth::kYes : WriteBoth::kNo);
}

#ifndef TIERFS_VERSION
#define TIERFS_VERSION "dev"
#endif

SessionInfo ThisProcessSession(const std::string& label) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  SessionInfo info;
  info.host = host;
  info.pid = static_cast<uint32_t>(getpid());
  info.mountpoint = label;
  info.version = TIERFS_VERSION;
  return info;
}

std::string AbsPath(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

}  // namespace tierfs::client
