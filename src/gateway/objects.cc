#include "gateway/objects.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

constexpr size_t kWriteBuf = 1 << 20;

Ctx RootCtx() { return Ctx::Root(); }

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (getrandom(raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) {
    uint64_t t = static_cast<uint64_t>(MonoNanos());
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(t >> (8 * (i % 8)));
  }
  return HexOf(raw);
}

}  // namespace

S3Error FromStatus(const Status& st, const std::string& what) {
  switch (st.code()) {
    case ENOENT: return Err(404, "NoSuchKey", "The specified key does not exist.");
    case EACCES:
    case EPERM: return Err(403, "AccessDenied", "Access Denied (" + st.message() + ")");
    case EROFS: return Err(403, "AccessDenied", "the volume is served read-only");
    case ENOTDIR:
      return Err(409, "ParentIsObject", "a parent of '" + what + "' is an object, not a directory");
    case EISDIR:
      return Err(409, "ObjectExistsAsDirectory", "'" + what + "' is a directory with objects below it");
    case ENOTEMPTY: return Err(409, "ObjectExistsAsDirectory", "'" + what + "' has objects below it");
    case EDQUOT: return Err(403, "QuotaExceeded", "a quota of the volume is full: " + st.message());
    case ENOSPC: return Err(507, "StorageFull", "the volume is full: " + st.message());
    case ENAMETOOLONG: return Err(400, "KeyTooLongError", "Your key is too long");
    case EEXIST:
    case ESTALE: return PreconditionFailed();
    case ETIMEDOUT:
    case EAGAIN: return Err(503, "ServiceUnavailable", "the volume is slow to answer, try again: " + st.message());
    default: return Err(500, "InternalError", "'" + what + "': " + st.ToString());
  }
}

Objects::Objects(Vfs* vfs, Options opts) : vfs_(vfs), meta_(vfs->meta()), opts_(std::move(opts)) {}

std::string Objects::StagingName(const std::string& kind) { return std::string(kHiddenPrefix) + kind + "-" + RandomHex(12); }

S3Result<bool> Objects::Init() {
  auto dir = [&](Ino parent, const std::string& name) -> S3Result<Ino> {
    auto found = meta_->Lookup(RootCtx(), parent, name);
    if (found.ok()) return found->first;
    if (found.status().code() != ENOENT) return FromStatus(found.status(), name);
    auto made = meta_->Mkdir(RootCtx(), parent, name, 01733);
    if (!made.ok() && made.status().code() == EEXIST) {  // another gateway made it meanwhile
      auto again = meta_->Lookup(RootCtx(), parent, name);
      if (!again.ok()) return FromStatus(again.status(), name);
      return again->first;
    }
    if (!made.ok()) return FromStatus(made.status(), name);
    // Mkdir applies the umask; the area must be writable (and not listable) by all.
    Attr a;
    a.mode = S_IFDIR | 01733;
    auto set = meta_->SetAttr(RootCtx(), made->first, kSetMode, a);
    if (!set.ok()) return FromStatus(set.status(), name);
    return made->first;
  };
  auto gw = dir(opts_.root, kGatewayDir);
  if (!gw.ok()) return gw.error();
  auto tmp = dir(*gw, "tmp");
  if (!tmp.ok()) return tmp.error();
  auto up = dir(*gw, "uploads");
  if (!up.ok()) return up.error();
  gw_dir_ = *gw;
  tmp_dir_ = *tmp;
  uploads_dir_ = *up;
  return true;
}

// ---- buckets ----

S3Result<Ino> Objects::Bucket(const Caller& c, const std::string& name) {
  if (!opts_.multi_buckets) {
    if (name != opts_.volume_name) return Err(404, "NoSuchBucket", "The specified bucket does not exist");
    return opts_.root;
  }
  if (!ValidBucketName(name)) return Err(404, "NoSuchBucket", "The specified bucket does not exist");
  auto found = meta_->Lookup(c.ctx, opts_.root, name);
  if (!found.ok()) {
    if (found.status().code() == ENOENT) return Err(404, "NoSuchBucket", "The specified bucket does not exist");
    return FromStatus(found.status(), name);
  }
  if (!found->second.IsDir()) return Err(404, "NoSuchBucket", "The specified bucket does not exist");
  return found->first;
}

S3Result<std::vector<Objects::BucketInfo>> Objects::Buckets(const Caller& c) {
  std::vector<BucketInfo> out;
  if (!opts_.multi_buckets) {
    auto a = meta_->GetAttr(opts_.root);
    if (!a.ok()) return FromStatus(a.status(), opts_.volume_name);
    out.push_back({opts_.volume_name, a->ctime_ns});
    return out;
  }
  auto entries = meta_->Readdir(c.ctx, opts_.root, true);
  if (!entries.ok()) return FromStatus(entries.status(), "/");
  for (const auto& e : *entries) {
    if (!e.attr.IsDir() || !ValidBucketName(e.name)) continue;
    out.push_back({e.name, e.attr.ctime_ns});
  }
  return out;
}

S3Result<bool> Objects::CreateBucket(const Caller& c, const std::string& name) {
  if (!ValidBucketName(name)) return Err(400, "InvalidBucketName", "The specified bucket is not valid.");
  if (!opts_.multi_buckets) {
    if (name == opts_.volume_name) return Err(409, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.");
    return Err(403, "AccessDenied", "this gateway serves one bucket, " + opts_.volume_name +
                                        " (start it with --multi-buckets to make top-level directories buckets)");
  }
  if (c.read_only) return AccessDenied("read-only access");
  auto made = meta_->Mkdir(c.ctx, opts_.root, name, 0777);
  if (!made.ok()) {
    if (made.status().code() == EEXIST) {
      return Err(409, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.");
    }
    return FromStatus(made.status(), name);
  }
  return true;
}

S3Result<bool> Objects::DeleteBucket(const Caller& c, const std::string& name) {
  auto b = Bucket(c, name);
  if (!b.ok()) return b.error();
  if (!opts_.multi_buckets) return AccessDenied("the volume's own bucket cannot be deleted");
  if (c.read_only) return AccessDenied("read-only access");
  Status st = meta_->Rmdir(c.ctx, opts_.root, name, /*trash=*/false);
  if (st.code() == ENOTEMPTY) return Err(409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
  if (!st.ok()) return FromStatus(st, name);
  return true;
}

// ---- reading ----

S3Result<Ino> Objects::ParentOf(const Caller& c, Ino bucket, const KeyPath& k, bool make) {
  Ino dir = bucket;
  for (const std::string& part : k.dirs) {
    auto found = meta_->Lookup(c.ctx, dir, part);
    if (found.ok()) {
      if (!found->second.IsDir()) return FromStatus(Status::Err(ENOTDIR, ""), part);
      dir = found->first;
      continue;
    }
    if (found.status().code() != ENOENT || !make) return FromStatus(found.status(), part);
    auto made = meta_->Mkdir(c.ctx, dir, part, 0777);
    if (!made.ok() && made.status().code() == EEXIST) {
      found = meta_->Lookup(c.ctx, dir, part);  // made by a racing writer
      if (!found.ok()) return FromStatus(found.status(), part);
      if (!found->second.IsDir()) return FromStatus(Status::Err(ENOTDIR, ""), part);
      dir = found->first;
      continue;
    }
    if (!made.ok()) return FromStatus(made.status(), part);
    ObjectMeta m;
    m.dir = "implicit";
    Status st = meta_->SetXattr(RootCtx(), made->first, kObjectXattr, m.ToJson(), 0);
    if (!st.ok()) spdlog::warn("gateway: marking directory {} as made by the gateway failed: {}", part, st.ToString());
    dir = made->first;
  }
  return dir;
}

S3Result<ObjectInfo> Objects::Lookup(const Caller& c, Ino bucket, const KeyPath& k) {
  ObjectInfo info;
  if (k.is_dir() && k.dirs.empty()) return Err(404, "NoSuchKey", "The specified key does not exist.");
  KeyPath parent_path = k;
  std::string name = k.leaf;
  if (k.is_dir()) {
    name = parent_path.dirs.back();
    parent_path.dirs.pop_back();
  }
  auto parent = ParentOf(c, bucket, parent_path, false);
  if (!parent.ok()) {
    if (parent.error().code == "ParentIsObject") return Err(404, "NoSuchKey", "The specified key does not exist.");
    return parent.error();
  }
  auto found = meta_->Lookup(c.ctx, *parent, name);
  if (!found.ok()) return FromStatus(found.status(), name);
  info.ino = found->first;
  info.parent = *parent;
  info.attr = found->second;
  info.dir = info.attr.IsDir();
  if (info.dir != k.is_dir() || (!info.dir && !info.attr.IsRegular())) {
    return Err(404, "NoSuchKey", "The specified key does not exist.");
  }
  auto x = meta_->GetXattr(RootCtx(), info.ino, kObjectXattr);
  if (x.ok()) {
    if (auto m = ObjectMeta::FromJson(*x)) info.meta = *m;
  }
  return info;
}

S3Result<ObjectInfo> Objects::Head(const Caller& c, Ino bucket, const std::string& key) {
  auto k = ParseKey(key);
  if (!k.ok()) return Err(404, "NoSuchKey", "The specified key does not exist.");
  auto info = Lookup(c, bucket, *k);
  if (!info.ok()) return info;
  if (info->dir) {
    // A directory is the object "a/b/" (size 0, the ETag of no bytes) when listing shows it:
    // a PUT of "a/b/" made it, or it was made through a mount and is empty. One the
    // gateway made for the keys below it is only their prefix.
    if (info->meta.dir == "implicit") return Err(404, "NoSuchKey", "The specified key does not exist.");
    if (info->meta.dir != "explicit") {
      auto page = meta_->ReaddirPage(c.ctx, info->ino, "", 1, false);
      if (page.ok() && !page->empty()) return Err(404, "NoSuchKey", "The specified key does not exist.");
    }
    info->meta.etag = kEmptyEtag;
    return info;
  }
  auto ok = EnsureEtag(c, &*info);
  if (!ok.ok()) return ok.error();
  return info;
}

std::string Objects::IdentityEtag(const ObjectInfo& info) {
  if (info.attr.length == 0) return kEmptyEtag;
  Checksummer md5(ChecksumAlgo::kMd5);
  md5.Update(std::to_string(info.ino) + ":" + std::to_string(info.attr.seq) + ":" + std::to_string(info.attr.length) +
             ":" + std::to_string(info.attr.mtime_ns));
  return HexOf(md5.Digest()) + "-1";
}

S3Result<bool> Objects::EnsureEtag(const Caller& c, ObjectInfo* info) {
  if (!info->meta.etag.empty() && info->meta.seq == info->attr.seq) return true;
  const uint64_t seq = info->attr.seq;
  std::string etag;
  if (info->attr.length > opts_.etag_max_read) {
    etag = IdentityEtag(*info);
  } else {
    auto fh = OpenRead(c, info->ino);
    if (!fh.ok()) return fh.error();
    Checksummer md5(ChecksumAlgo::kMd5);
    std::string buf(kWriteBuf, '\0');
    for (uint64_t off = 0;;) {
      auto n = ReadAt(*fh, off, buf.size(), buf.data());
      if (!n.ok()) {
        Close(*fh);
        return n.error();
      }
      if (*n == 0) break;
      md5.Update(std::string_view(buf.data(), *n));
      off += *n;
    }
    Close(*fh);
    etag = HexOf(md5.Digest());
  }
  info->meta.etag = etag;
  info->meta.seq = seq;
  // Stored only if the file did not change while it was read (a newer version gets its own).
  auto now = meta_->GetAttr(info->ino);
  if (now.ok() && now->seq == seq) {
    Status st = meta_->SetXattr(RootCtx(), info->ino, kObjectXattr, info->meta.ToJson(), 0);
    if (!st.ok()) spdlog::debug("gateway: storing the ETag of inode {} failed: {}", info->ino, st.ToString());
  }
  return true;
}

S3Result<uint64_t> Objects::OpenRead(const Caller& c, Ino ino) {
  auto r = vfs_->Open(c.ctx, ino, O_RDONLY);
  if (!r.ok()) return FromStatus(r.status(), "inode " + std::to_string(ino));
  return r->fh;
}

S3Result<size_t> Objects::ReadAt(uint64_t fh, uint64_t off, size_t n, char* buf) {
  auto r = vfs_->Read(fh, off, n, buf);
  if (!r.ok()) return FromStatus(r.status(), "read");
  return *r;
}

void Objects::Close(uint64_t fh) { vfs_->Release(fh).ok(); }

// ---- writing ----

Objects::PutStream::PutStream(Objects* o, Caller c, Ino staging, std::string name, uint64_t fh)
    : o_(o), c_(std::move(c)), staging_(staging), name_(std::move(name)), fh_(fh) {
  buf_.reserve(kWriteBuf);
}

Objects::PutStream::~PutStream() {
  if (done_) return;
  // Not published: the staged file goes, never into the trash.
  o_->vfs_->Release(fh_).ok();
  o_->meta_->Unlink(c_.ctx, staging_, name_, /*trash=*/false).ok();
}

std::optional<S3Error> Objects::PutStream::FlushBuf() {
  if (buf_.empty()) return std::nullopt;
  Status st = o_->vfs_->Write(fh_, off_ - buf_.size(), buf_.data(), buf_.size());
  buf_.clear();
  if (!st.ok()) return FromStatus(st, "upload");
  return std::nullopt;
}

std::optional<S3Error> Objects::PutStream::Write(std::string_view data) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), kWriteBuf - buf_.size());
    buf_.append(data.substr(0, n));
    off_ += n;
    data.remove_prefix(n);
    if (buf_.size() == kWriteBuf) {
      if (auto e = FlushBuf()) return e;
    }
  }
  return std::nullopt;
}

S3Result<std::unique_ptr<Objects::PutStream>> Objects::BeginPut(const Caller& c, Ino bucket, const std::string& key) {
  if (c.read_only) return AccessDenied("read-only access");
  auto k = ParseKey(key);
  if (!k.ok()) return k.error();
  // Fail before the body is read when a parent is a file.
  Ino dir = bucket;
  for (const std::string& part : k->dirs) {
    auto found = meta_->Lookup(c.ctx, dir, part);
    if (!found.ok()) break;
    if (!found->second.IsDir()) return FromStatus(Status::Err(ENOTDIR, ""), key);
    dir = found->first;
  }
  std::string name = StagingName("put");
  auto made = vfs_->Create(c.ctx, tmp_dir_, name, 0666, O_RDWR | O_EXCL);
  if (!made.ok()) return FromStatus(made.status(), key);
  return std::unique_ptr<PutStream>(new PutStream(this, c, tmp_dir_, name, made->second.fh));
}

S3Result<std::unique_ptr<Objects::PutStream>> Objects::BeginStaged(const Caller& c, Ino dir, const std::string& name) {
  if (c.read_only) return AccessDenied("read-only access");
  auto made = vfs_->Create(c.ctx, dir, name, 0600, O_RDWR | O_TRUNC);
  if (!made.ok()) return FromStatus(made.status(), name);
  return std::unique_ptr<PutStream>(new PutStream(this, c, dir, name, made->second.fh));
}

S3Result<std::string> Objects::FinishStaged(PutStream* put) {
  if (auto e = put->FlushBuf()) return *e;
  Status st = vfs_->Flush(put->fh_, 0);
  if (!st.ok()) return FromStatus(st, put->name_);
  vfs_->Release(put->fh_).ok();
  put->fh_ = 0;
  put->done_ = true;
  return put->Md5Hex();
}

S3Result<ObjectInfo> Objects::Publish(std::unique_ptr<PutStream> put, Ino bucket, const std::string& key,
                                      ObjectMeta meta, const WriteCondition& cond) {
  if (auto e = put->FlushBuf()) return *e;
  // Commit the data (close(2) would): what follows publishes a complete file.
  Status st = vfs_->Flush(put->fh_, 0);
  if (!st.ok()) return FromStatus(st, key);
  vfs_->Release(put->fh_).ok();
  put->fh_ = 0;
  if (meta.etag.empty()) meta.etag = put->Md5Hex();
  auto k = ParseKey(key);
  if (!k.ok()) return k.error();
  auto info = PublishStaged(put->c_, put->staging_, put->name_, bucket, key, *k, std::move(meta), cond);
  if (info.ok()) put->done_ = true;
  return info;
}

S3Result<ObjectInfo> Objects::PublishStaged(const Caller& c, Ino from, const std::string& name, Ino bucket,
                                            const std::string& key, const KeyPath& k, ObjectMeta meta,
                                            const WriteCondition& cond) {
  // If-Match is checked before any directory is made for the key, so a refused write leaves
  // nothing behind (the rename below decides it for good).
  RenameCondition rc;
  Ino rc_parent = 0;
  if (cond.if_none_match_any) rc.dst_absent = true;
  if (cond.if_match) {
    auto cur = Lookup(c, bucket, k);
    if (!cur.ok()) {
      if (cur.error().http == 404) return PreconditionFailed();
      return cur.error();
    }
    auto ok = EnsureEtag(c, &*cur);
    if (!ok.ok()) return ok.error();
    if (*cond.if_match != "*" && *cond.if_match != cur->meta.etag) return PreconditionFailed();
    rc.dst_ino = cur->ino;
    rc.dst_seq = cur->attr.seq;
    rc_parent = cur->parent;  // the key exists: its directories too, no second walk
  }
  auto dir = rc_parent ? S3Result<Ino>(rc_parent) : ParentOf(c, bucket, k, true);
  if (!dir.ok()) return dir.error();
  // The ETag describes the staged content: its change sequence goes with it.
  auto staged = meta_->Lookup(RootCtx(), from, name);
  if (!staged.ok()) return FromStatus(staged.status(), key);
  meta.seq = staged->second.seq;
  rc.set_xattrs.emplace_back(kObjectXattr, meta.ToJson());
  Status st = meta_->Rename(c.ctx, from, name, *dir, k.leaf, 0, &rc);
  if (!st.ok()) {
    PruneImplicit(c, bucket, *dir);  // the directories made for a write that lost
    return FromStatus(st, key);
  }
  ObjectInfo info;
  auto found = meta_->Lookup(c.ctx, *dir, k.leaf);
  if (!found.ok()) return FromStatus(found.status(), key);
  info.ino = found->first;
  info.parent = *dir;
  info.attr = found->second;
  info.meta = std::move(meta);
  return info;
}

S3Result<ObjectInfo> Objects::PutDirectory(const Caller& c, Ino bucket, const std::string& key, ObjectMeta meta,
                                           const WriteCondition& cond) {
  if (c.read_only) return AccessDenied("read-only access");
  auto k = ParseKey(key);
  if (!k.ok()) return k.error();
  if (cond.if_none_match_any || cond.if_match) {
    // The object is empty and the same whoever writes it, so checking before the mkdir is
    // enough: two racing writers of "d/" make one directory.
    auto cur = Head(c, bucket, key);
    if (!cur.ok() && cur.error().http != 404) return cur.error();
    if (cond.if_none_match_any && cur.ok()) return PreconditionFailed();
    if (cond.if_match && (!cur.ok() || (*cond.if_match != "*" && *cond.if_match != cur->meta.etag))) {
      return PreconditionFailed();
    }
  }
  KeyPath parent = *k;
  std::string name = parent.dirs.back();
  parent.dirs.pop_back();
  auto dir = ParentOf(c, bucket, parent, true);
  if (!dir.ok()) return dir.error();
  Ino ino = 0;
  auto made = meta_->Mkdir(c.ctx, *dir, name, 0777);
  if (made.ok()) {
    ino = made->first;
  } else if (made.status().code() == EEXIST) {
    auto found = meta_->Lookup(c.ctx, *dir, name);
    if (!found.ok()) return FromStatus(found.status(), key);
    if (!found->second.IsDir()) return Err(409, "ObjectExistsAsFile", "'" + key + "' names a directory, but an object '" +
                                                                           key.substr(0, key.size() - 1) + "' exists");
    ino = found->first;
  } else {
    return FromStatus(made.status(), key);
  }
  meta.dir = "explicit";
  meta.etag.clear();
  Status st = meta_->SetXattr(RootCtx(), ino, kObjectXattr, meta.ToJson(), 0);
  if (!st.ok()) return FromStatus(st, key);
  return Head(c, bucket, key);
}

S3Result<ObjectInfo> Objects::Copy(const Caller& c, const ObjectInfo& src, Ino bucket, const std::string& key,
                                   ObjectMeta meta, const WriteCondition& cond) {
  if (c.read_only) return AccessDenied("read-only access");
  auto k = ParseKey(key);
  if (!k.ok()) return k.error();
  if (k->is_dir()) return InvalidArgument("a copy's destination must be an object, not a directory key");
  std::string name = StagingName("copy");
  auto cloned = meta_->Clone(c.ctx, src.ino, tmp_dir_, name);
  if (!cloned.ok()) return FromStatus(cloned.status(), key);
  // A clone keeps its source's times; S3 gives a copy its own LastModified.
  auto made = meta_->Lookup(c.ctx, tmp_dir_, name);
  Status touched = made.ok() ? meta_->SetAttr(c.ctx, made->first, kSetMtimeNow, Attr()).status() : made.status();
  if (!touched.ok()) {
    meta_->Unlink(c.ctx, tmp_dir_, name, /*trash=*/false).ok();
    return FromStatus(touched, key);
  }
  auto info = PublishStaged(c, tmp_dir_, name, bucket, key, *k, std::move(meta), cond);
  if (!info.ok()) meta_->Unlink(c.ctx, tmp_dir_, name, /*trash=*/false).ok();
  return info;
}

S3Result<bool> Objects::Delete(const Caller& c, Ino bucket, const std::string& key) {
  if (c.read_only) return AccessDenied("read-only access");
  auto k = ParseKey(key);
  if (!k.ok()) return true;  // a key that cannot exist is deleted already
  auto info = Lookup(c, bucket, *k);
  if (!info.ok()) {
    if (info.error().http == 404) return true;
    return info.error();
  }
  if (info->dir) {
    // "a/b/": the object is the directory's marker; the directory itself goes only if it is
    // empty and the gateway made it.
    bool ours = !info->meta.dir.empty();
    if (info->meta.dir == "explicit") {
      ObjectMeta m = info->meta;
      m.dir = "implicit";
      meta_->SetXattr(RootCtx(), info->ino, kObjectXattr, m.ToJson(), 0).ok();
    }
    if (ours) {
      Status st = meta_->Rmdir(c.ctx, info->parent, k->dirs.back(), /*trash=*/false);
      if (!st.ok() && st.code() != ENOTEMPTY && st.code() != ENOENT) return FromStatus(st, key);
      if (st.ok()) PruneImplicit(c, bucket, info->parent);
    }
    return true;
  }
  Status st = meta_->Unlink(c.ctx, info->parent, k->leaf);
  if (!st.ok() && st.code() != ENOENT) return FromStatus(st, key);
  PruneImplicit(c, bucket, info->parent);
  return true;
}

void Objects::PruneImplicit(const Caller& c, Ino bucket, Ino dir) {
  for (int depth = 0; depth < 1000 && dir != bucket && dir != opts_.root; ++depth) {
    auto x = meta_->GetXattr(RootCtx(), dir, kObjectXattr);
    if (!x.ok()) return;
    auto m = ObjectMeta::FromJson(*x);
    if (!m || m->dir != "implicit") return;
    auto a = meta_->GetAttr(dir);
    if (!a.ok()) return;
    Ino parent = a->parent;
    // Its name in the parent: the entries of a directory made for a key are few.
    auto name = meta_->PathOf(dir, parent);
    if (!name.ok() || name->empty()) return;
    std::string leaf = name->substr(name->rfind('/') + 1);
    if (!meta_->Rmdir(c.ctx, parent, leaf, /*trash=*/false).ok()) return;
    dir = parent;
  }
}

}  // namespace tierfs::gateway
