#include "gateway/multipart.h"

#include <fcntl.h>
#include <sys/random.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "gateway/checksums.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

Ctx Root() { return Ctx::Root(); }

std::string NewUploadId() {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    for (size_t i = 0; i < sizeof b; ++i) b[i] = static_cast<unsigned char>(MonoNanos() >> (i % 8));
  }
  return HexOf(std::string_view(reinterpret_cast<const char*>(b), sizeof b));
}

bool ValidUploadId(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

S3Error NoSuchUpload() {
  return Err(404, "NoSuchUpload",
             "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted "
             "or completed.");
}

std::string UploadJson(const Multipart::Upload& u) {
  nlohmann::json j = {{"key", u.key}, {"bucket", u.bucket}, {"initiated_ns", u.initiated_ns}, {"meta", u.meta.ToJson()}};
  return j.dump();
}

bool ParseUpload(const std::string& s, Multipart::Upload* u) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    u->key = j.at("key").get<std::string>();
    u->bucket = j.at("bucket").get<Ino>();
    u->initiated_ns = j.at("initiated_ns").get<int64_t>();
    auto m = ObjectMeta::FromJson(j.at("meta").get<std::string>());
    if (m) u->meta = *m;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::string PartName(int number) {
  char buf[16];
  snprintf(buf, sizeof buf, "%05d", number);
  return buf;
}

S3Result<Multipart::Upload> Multipart::Create(const Caller& c, Ino bucket, const std::string& key, ObjectMeta meta) {
  if (c.read_only) return AccessDenied("read-only access");
  auto k = ParseKey(key);
  if (!k.ok()) return k.error();
  if (k->is_dir()) return InvalidArgument("a multipart upload's key must name an object, not a directory");
  Upload u;
  u.id = NewUploadId();
  u.key = key;
  u.bucket = bucket;
  u.owner = c.ctx.uid;
  u.initiated_ns = NowNanos();
  u.meta = std::move(meta);
  Meta* m = o_->vfs()->meta();
  auto made = m->Mkdir(c.ctx, o_->uploads_dir(), u.id, 0700);
  if (!made.ok()) return FromStatus(made.status(), key);
  u.dir = made->first;
  Status st = m->SetXattr(Root(), u.dir, kUploadXattr, UploadJson(u), 0);
  if (!st.ok()) {
    m->Rmdir(Root(), o_->uploads_dir(), u.id, false).ok();
    return FromStatus(st, key);
  }
  return u;
}

S3Result<Multipart::Upload> Multipart::Find(const Caller& c, Ino bucket, const std::string& key, const std::string& id) {
  if (!ValidUploadId(id)) return NoSuchUpload();
  Meta* m = o_->vfs()->meta();
  auto found = m->Lookup(Root(), o_->uploads_dir(), id);
  if (!found.ok()) return NoSuchUpload();
  auto x = m->GetXattr(Root(), found->first, kUploadXattr);
  Upload u;
  if (!x.ok() || !ParseUpload(*x, &u) || u.bucket != bucket || u.key != key) return NoSuchUpload();
  u.id = id;
  u.dir = found->first;
  u.owner = found->second.uid;
  // Only its initiator (or root) works on an upload, as its directory's mode says.
  if (c.ctx.uid != 0 && c.ctx.uid != u.owner) return AccessDenied();
  return u;
}

S3Result<std::unique_ptr<Objects::PutStream>> Multipart::BeginPart(const Caller& c, const Upload& u) {
  return o_->BeginStaged(c, u.dir, Objects::StagingName("part"));
}

S3Result<Multipart::Part> Multipart::FinishPart(const Caller& c, const Upload& u, int number,
                                                std::unique_ptr<Objects::PutStream> put) {
  const std::string staged = put->name();
  auto md5 = o_->FinishStaged(put.get());
  if (!md5.ok()) return md5.error();
  Meta* m = o_->vfs()->meta();
  auto drop = [&] { m->Unlink(c.ctx, u.dir, staged, false).ok(); };
  auto found = m->Lookup(c.ctx, u.dir, staged);
  if (!found.ok()) {
    drop();
    return FromStatus(found.status(), u.key);
  }
  ObjectMeta pm;
  pm.etag = *md5;
  pm.seq = found->second.seq;
  Status st = m->SetXattr(Root(), found->first, kObjectXattr, pm.ToJson(), 0);
  // Renamed into place: a part uploaded again replaces the earlier one whole.
  RenameCondition replace;
  replace.no_trash = true;  // the part it replaces is the client's to overwrite, not a removal
  if (st.ok()) st = m->Rename(c.ctx, u.dir, staged, u.dir, PartName(number), 0, &replace);
  if (!st.ok()) {
    drop();
    return FromStatus(st, u.key);
  }
  return Part{number, found->second.length, *md5, found->second.mtime_ns};
}

S3Result<Multipart::Part> Multipart::CopyPart(const Caller& c, const Upload& u, int number, const ObjectInfo& src,
                                              uint64_t off, uint64_t len) {
  Vfs* vfs = o_->vfs();
  auto in = vfs->Open(c.ctx, src.ino, O_RDONLY);
  if (!in.ok()) return FromStatus(in.status(), u.key);
  auto put = BeginPart(c, u);
  if (!put.ok()) {
    vfs->Release(in->fh).ok();
    return put.error();
  }
  // No byte of the source is read (a 100 GB copy would otherwise fetch 100 GB from the
  // store): the part shares the source's slices, and its ETag is the source's own when the
  // part is the whole of a single-part object, else the MD5 of the source's identity,
  // version and range, which changes whenever those bytes may. Clients hand part ETags back
  // to Complete and never compare them with the bytes.
  if (off + len > src.attr.length) {
    vfs->Release(in->fh).ok();
    return InvalidArgument("the copy source range is beyond the object's end");
  }
  std::string etag;
  if (off == 0 && len == src.attr.length && !src.meta.etag.empty() && src.meta.seq == src.attr.seq &&
      src.meta.etag.find('-') == std::string::npos) {
    etag = src.meta.etag;
  } else {
    Checksummer md5(ChecksumAlgo::kMd5);
    md5.Update("copy:" + std::to_string(src.ino) + ":" + std::to_string(src.attr.seq) + ":" +
               std::to_string(src.attr.mtime_ns) + ":" + std::to_string(off) + ":" + std::to_string(len));
    etag = HexOf(md5.Digest());
  }
  auto copied = vfs->CopyFileRange(c.ctx, in->fh, off, (*put)->fh(), 0, len);
  vfs->Release(in->fh).ok();
  if (!copied.ok()) return FromStatus(copied.status(), u.key);
  (*put)->SetWritten(len, etag);
  return FinishPart(c, u, number, std::move(*put));
}

S3Result<std::vector<Multipart::Part>> Multipart::Parts(const Caller& c, const Upload& u) {
  Meta* m = o_->vfs()->meta();
  auto entries = m->Readdir(c.ctx, u.dir, true);
  if (!entries.ok()) return FromStatus(entries.status(), u.key);
  std::vector<Part> out;
  for (const auto& e : *entries) {
    if (e.name.size() != 5 || e.name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto x = m->GetXattr(Root(), e.ino, kObjectXattr);
    auto pm = x.ok() ? ObjectMeta::FromJson(*x) : std::nullopt;
    if (!pm) continue;
    out.push_back(Part{std::stoi(e.name), e.attr.length, pm->etag, e.attr.mtime_ns});
  }
  std::sort(out.begin(), out.end(), [](const Part& a, const Part& b) { return a.number < b.number; });
  return out;
}

S3Result<std::vector<Multipart::Upload>> Multipart::List(const Caller& c, Ino bucket) {
  Meta* m = o_->vfs()->meta();
  auto entries = m->Readdir(Root(), o_->uploads_dir(), true);
  if (!entries.ok()) return FromStatus(entries.status(), "uploads");
  std::vector<Upload> out;
  for (const auto& e : *entries) {
    if (!ValidUploadId(e.name)) continue;
    if (c.ctx.uid != 0 && e.attr.uid != c.ctx.uid) continue;  // each user sees their own
    auto x = m->GetXattr(Root(), e.ino, kUploadXattr);
    Upload u;
    if (!x.ok() || !ParseUpload(*x, &u) || u.bucket != bucket) continue;
    u.id = e.name;
    u.dir = e.ino;
    u.owner = e.attr.uid;
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const Upload& a, const Upload& b) {
    return a.key != b.key ? a.key < b.key : a.initiated_ns < b.initiated_ns;
  });
  return out;
}

S3Result<ObjectInfo> Multipart::Complete(const Caller& c, const Upload& u,
                                         const std::vector<std::pair<int, std::string>>& parts,
                                         const WriteCondition& cond) {
  if (parts.empty()) return Err(400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema");
  auto have = Parts(c, u);
  if (!have.ok()) return have.error();
  std::vector<const Part*> use;
  int last = 0;
  for (const auto& [number, etag] : parts) {
    if (number <= last) return Err(400, "InvalidPartOrder", "The list of parts was not in ascending order. Parts must be ordered by part number.");
    last = number;
    auto it = std::find_if(have->begin(), have->end(), [&](const Part& p) { return p.number == number; });
    std::string want = etag;
    if (want.size() >= 2 && want.front() == '"' && want.back() == '"') want = want.substr(1, want.size() - 2);
    if (it == have->end() || it->etag != want) {
      return Err(400, "InvalidPart", "One or more of the specified parts could not be found. The part may not have been "
                                     "uploaded, or the specified entity tag may not match the part's entity tag.");
    }
    use.push_back(&*it);
  }
  for (size_t i = 0; i + 1 < use.size(); ++i) {
    if (use[i]->size < kMinPartSize) {
      return Err(400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.");
    }
  }
  Vfs* vfs = o_->vfs();
  Meta* m = vfs->meta();
  const std::string staged = Objects::StagingName("complete");
  auto out = vfs->Create(c.ctx, o_->staging_dir(), staged, 0666, O_RDWR | O_EXCL);
  if (!out.ok()) return FromStatus(out.status(), u.key);
  const uint64_t ofh = out->second.fh;
  auto fail = [&](const S3Error& e) -> S3Result<ObjectInfo> {
    vfs->Release(ofh).ok();
    m->Unlink(c.ctx, o_->staging_dir(), staged, false).ok();
    return e;
  };
  Checksummer etags(ChecksumAlgo::kMd5);
  uint64_t pos = 0;
  for (const Part* p : use) {
    etags.Update(Unhex(p->etag));
    auto found = m->Lookup(c.ctx, u.dir, PartName(p->number));
    if (!found.ok()) return fail(FromStatus(found.status(), u.key));
    auto in = vfs->Open(c.ctx, found->first, O_RDONLY);
    if (!in.ok()) return fail(FromStatus(in.status(), u.key));
    uint64_t done = 0;
    Status st;
    while (done < p->size) {
      auto n = vfs->CopyFileRange(c.ctx, in->fh, done, ofh, pos + done, p->size - done);
      if (!n.ok()) {
        st = n.status();
        break;
      }
      if (*n == 0) {
        st = Status::Err(EIO, "part " + std::to_string(p->number) + " is shorter than listed");
        break;
      }
      done += *n;
    }
    vfs->Release(in->fh).ok();
    if (!st.ok()) return fail(FromStatus(st, u.key));
    pos += p->size;
  }
  Status st = vfs->Flush(ofh, 0);
  if (!st.ok()) return fail(FromStatus(st, u.key));
  vfs->Release(ofh).ok();
  ObjectMeta meta = u.meta;
  meta.etag = HexOf(etags.Digest()) + "-" + std::to_string(use.size());
  meta.parts = static_cast<uint32_t>(use.size());
  auto k = ParseKey(u.key);
  if (!k.ok()) return k.error();
  auto info = o_->PublishStaged(c, o_->staging_dir(), staged, u.bucket, u.key, *k, std::move(meta), cond);
  if (!info.ok()) {
    m->Unlink(c.ctx, o_->staging_dir(), staged, false).ok();
    return info;
  }
  RemoveUpload(c.ctx, u).ok();
  return info;
}

S3Result<bool> Multipart::Abort(const Caller& c, const Upload& u) { return RemoveUpload(c.ctx, u); }

S3Result<bool> Multipart::RemoveUpload(const Ctx& ctx, const Upload& u) {
  Meta* m = o_->vfs()->meta();
  auto entries = m->Readdir(ctx, u.dir, false);
  if (entries.ok()) {
    // Parts and staged pieces go at once, never into the trash.
    for (const auto& e : *entries) m->Unlink(ctx, u.dir, e.name, false).ok();
  }
  Status st = m->Rmdir(ctx, o_->uploads_dir(), u.id, false);
  if (!st.ok() && st.code() != ENOENT) return FromStatus(st, u.key);
  return true;
}

size_t Multipart::CleanOlderThan(int64_t max_age_ns) {
  Meta* m = o_->vfs()->meta();
  auto entries = m->Readdir(Root(), o_->uploads_dir(), false);
  if (!entries.ok()) return 0;
  const int64_t now = NowNanos();
  size_t removed = 0;
  for (const auto& e : *entries) {
    if (!ValidUploadId(e.name)) continue;
    auto x = m->GetXattr(Root(), e.ino, kUploadXattr);
    Upload u;
    if (!x.ok() || !ParseUpload(*x, &u) || now - u.initiated_ns < max_age_ns) continue;
    u.id = e.name;
    u.dir = e.ino;
    if (RemoveUpload(Root(), u).ok()) ++removed;
  }
  return removed;
}

}  // namespace tierfs::gateway
