// Object operations: GetObject, HeadObject, PutObject, CopyObject, DeleteObject,
// DeleteObjects.
#include <cctype>
#include <memory>

#include "gateway/s3_service.h"
#include "gateway/xml_out.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

constexpr uint64_t kMaxPut = 5ull << 30;  // S3: 5 GiB in one PUT (multipart above)
constexpr size_t kReadPiece = 1 << 20;

// "bytes=a-b" / "bytes=a-" / "bytes=-n" against size: false for a header S3 ignores (not
// one byte range); *unsatisfiable for a range past the end.
bool ParseRange(const std::string& h, uint64_t size, uint64_t* off, uint64_t* len, bool* unsatisfiable) {
  *unsatisfiable = false;
  if (h.rfind("bytes=", 0) != 0) return false;
  std::string spec = h.substr(6);
  if (spec.find(',') != std::string::npos) return false;  // S3 serves no multi-range requests
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return false;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto digits = [](const std::string& s) { return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos; };
  if (a.empty()) {
    if (!digits(b)) return false;
    uint64_t n = std::stoull(b);
    if (n == 0 || size == 0) {
      *unsatisfiable = true;
      return true;
    }
    n = std::min(n, size);
    *off = size - n;
    *len = n;
    return true;
  }
  if (!digits(a) || (!b.empty() && !digits(b))) return false;
  uint64_t start = std::stoull(a);
  uint64_t end = b.empty() ? UINT64_MAX : std::stoull(b);
  if (end < start) return false;
  if (start >= size) {
    *unsatisfiable = true;
    return true;
  }
  end = std::min(end, size - 1);
  *off = start;
  *len = end - start + 1;
  return true;
}

// "bucket/key" or "/bucket/key" (URL-encoded, maybe with ?versionId=...).
bool SplitCopySource(const std::string& raw, std::string* bucket, std::string* key) {
  std::string s = httplib::detail::decode_url(raw.substr(0, raw.find('?')), false);
  if (!s.empty() && s[0] == '/') s = s.substr(1);
  size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size()) return false;
  *bucket = s.substr(0, slash);
  *key = s.substr(slash + 1);
  return true;
}

}  // namespace

std::optional<S3Error> S3Service::GetObject(S3Req& r, bool head) {
  auto o = objects_->Head(r.caller, r.bucket_ino, r.key);
  if (!o.ok()) return o.error();
  if (auto e = ReadConditions(r, *o, "")) return e;
  ObjectHeaders(r, *o);
  const uint64_t size = o->dir ? 0 : o->attr.length;
  uint64_t off = 0, len = size;
  bool unsatisfiable = false;
  std::string range = r.Header("range");
  bool ranged = !range.empty() && ParseRange(range, size, &off, &len, &unsatisfiable);
  if (r.HasParam("partNumber")) {
    if (r.Param("partNumber") != "1" || o->meta.parts > 1) {
      return NotImplemented("GET by partNumber of a multipart object");
    }
  }
  if (unsatisfiable) {
    r.res.set_header("Content-Range", "bytes */" + std::to_string(size));
    return Err(416, "InvalidRange", "The requested range is not satisfiable");
  }
  std::string type = o->meta.content_type.empty() ? "binary/octet-stream" : o->meta.content_type;
  // response-* parameters override the stored headers (signed requests only, as in S3).
  if (!r.id.access_key.empty()) {
    for (const char* h : {"content-type", "content-language", "expires", "cache-control", "content-disposition",
                          "content-encoding"}) {
      std::string p = std::string("response-") + h;
      if (!r.HasParam(p)) continue;
      if (std::string(h) == "content-type") {
        type = r.Param(p);
      } else {
        r.res.set_header(h, r.Param(p));
      }
    }
  }
  if (ranged) {
    r.res.status = 206;
    r.res.set_header("Content-Range", "bytes " + std::to_string(off) + "-" + std::to_string(off + len - 1) + "/" +
                                          std::to_string(size));
  } else {
    r.res.status = 200;
  }
  if (head || len == 0) {
    r.res.set_header("Content-Type", type);
    r.res.set_header("Content-Length", std::to_string(len));
    return std::nullopt;
  }
  auto fh = objects_->OpenRead(r.caller, o->ino);
  if (!fh.ok()) return fh.error();
  Objects* objects = objects_;
  uint64_t handle = *fh;
  auto buf = std::make_shared<std::string>(std::min<uint64_t>(len, kReadPiece), '\0');
  r.res.set_content_provider(
      static_cast<size_t>(len), type,
      [objects, handle, buf, off](size_t offset, size_t length, httplib::DataSink& sink) {
        size_t want = std::min(length, buf->size());
        auto n = objects->ReadAt(handle, off + offset, want, buf->data());
        if (!n.ok() || *n == 0) return false;  // the connection is closed: the client sees a short body
        return sink.write(buf->data(), *n);
      },
      [objects, handle](bool) { objects->Close(handle); });
  return std::nullopt;
}

std::optional<S3Error> S3Service::PutObject(S3Req& r) {
  const bool chunked = r.Header("transfer-encoding").find("chunked") != std::string::npos;
  std::string cl = r.Header("content-length");
  if (cl.empty() && !chunked) return Err(411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
  std::string decoded = r.Header("x-amz-decoded-content-length");
  const std::string& declared = decoded.empty() ? cl : decoded;
  if (!declared.empty()) {
    if (declared.find_first_not_of("0123456789") != std::string::npos || declared.size() > 19) {
      return InvalidArgument("bad Content-Length '" + declared + "'");
    }
    if (std::stoull(declared) > kMaxPut) {
      return Err(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size (5 GiB in one PUT; use a multipart upload)");
    }
  }
  auto meta = MetaFromHeaders(r);
  if (!meta.ok()) return meta.error();
  auto cond = WriteConditions(r);
  if (!cond.ok()) return cond.error();
  if (r.key.back() == '/') {
    BodyResult br;
    bool nonempty = false;
    if (auto e = ReadBody(
            r,
            [&](std::string_view d) -> std::optional<S3Error> {
              nonempty |= !d.empty();
              return std::nullopt;
            },
            &br)) {
      return e;
    }
    if (nonempty) return InvalidArgument("TierFS stores a key ending in '/' as a directory: its body must be empty");
    auto o = objects_->PutDirectory(r.caller, r.bucket_ino, r.key, *meta, *cond);
    if (!o.ok()) return o.error();
    r.res.set_header("ETag", "\"" + o->meta.etag + "\"");
    return std::nullopt;
  }
  auto put = objects_->BeginPut(r.caller, r.bucket_ino, r.key);
  if (!put.ok()) return put.error();
  BodyResult br;
  Objects::PutStream* stream = put->get();
  if (auto e = ReadBody(r, [&](std::string_view d) { return stream->Write(d); }, &br)) return e;
  stream->SetMd5(br.md5_hex);
  meta->checksums = br.checksums;
  auto o = objects_->Publish(std::move(*put), r.bucket_ino, r.key, std::move(*meta), *cond);
  if (!o.ok()) return o.error();
  r.res.set_header("ETag", "\"" + o->meta.etag + "\"");
  for (const auto& [algo, v] : br.checksums) {
    if (auto a = ParseChecksumAlgo(algo)) r.res.set_header(ChecksumHeader(*a), v);
  }
  return std::nullopt;
}

S3Result<ObjectInfo> S3Service::CopySource(S3Req& r) {
  std::string bucket, key;
  if (!SplitCopySource(r.Header("x-amz-copy-source"), &bucket, &key)) {
    return InvalidArgument("Copy Source must mention the source bucket and key: sourcebucket/sourcekey");
  }
  auto b = objects_->Bucket(r.caller, bucket);
  if (!b.ok()) return b.error();
  if (opts_.multi_buckets && !r.user.all_buckets) {
    auto a = objects_->vfs()->meta()->GetAttr(*b);
    if (!a.ok() || !r.user.MaySee(bucket, a->uid)) return AccessDenied();
  }
  auto o = objects_->Head(r.caller, *b, key);
  if (!o.ok()) return o.error();
  if (o->dir) return InvalidArgument("the copy source '" + key + "' is a directory");
  if (auto e = ReadConditions(r, *o, "x-amz-copy-source-")) return *e;
  return o;
}

std::optional<S3Error> S3Service::CopyObject(S3Req& r) {
  auto src = CopySource(r);
  if (!src.ok()) return src.error();
  r.body_read = true;  // a copy has no body
  std::string directive = r.Header("x-amz-metadata-directive");
  if (!directive.empty() && directive != "COPY" && directive != "REPLACE") {
    return InvalidArgument("Unknown metadata directive.");
  }
  ObjectMeta meta;
  if (directive == "REPLACE") {
    auto m = MetaFromHeaders(r);
    if (!m.ok()) return m.error();
    meta = std::move(*m);
    meta.checksums = src->meta.checksums;
  } else {
    meta = src->meta;
    std::string bucket, key;
    SplitCopySource(r.Header("x-amz-copy-source"), &bucket, &key);
    if (bucket == r.bucket && key == r.key) {
      return Err(400, "InvalidRequest",
                 "This copy request is illegal because it is trying to copy an object to itself without changing the "
                 "object's metadata, storage class, website redirect location or encryption attributes.");
    }
  }
  meta.etag = src->meta.etag;  // the same bytes
  meta.parts = src->meta.parts;
  meta.dir.clear();
  auto cond = WriteConditions(r);
  if (!cond.ok()) return cond.error();
  auto o = objects_->Copy(r.caller, *src, r.bucket_ino, r.key, std::move(meta), *cond);
  if (!o.ok()) return o.error();
  Xml x;
  x.Open("CopyObjectResult", "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"")
      .Leaf("LastModified", Iso8601(o->attr.mtime_ns))
      .Leaf("ETag", "\"" + o->meta.etag + "\"")
      .Close("CopyObjectResult");
  r.res.set_content(x.str(), "application/xml");
  return std::nullopt;
}

std::optional<S3Error> S3Service::DeleteObject(S3Req& r) {
  auto d = objects_->Delete(r.caller, r.bucket_ino, r.key);
  if (!d.ok()) return d.error();
  r.res.status = 204;
  return std::nullopt;
}

std::optional<S3Error> S3Service::DeleteObjects(S3Req& r, Ino bucket) {
  auto body = ReadSmallBody(r, 2 << 20);
  if (!body.ok()) return body.error();
  auto req = ParseDeleteObjects(*body);
  if (!req.ok()) return req.error();
  Xml x;
  x.Open("DeleteResult", "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"");
  for (const std::string& key : req->keys) {
    auto d = objects_->Delete(r.caller, bucket, key);
    if (d.ok()) {
      if (!req->quiet) x.Open("Deleted").Leaf("Key", key).Close("Deleted");
    } else {
      x.Open("Error").Leaf("Key", key).Leaf("Code", d.error().code).Leaf("Message", d.error().message).Close("Error");
    }
  }
  x.Close("DeleteResult");
  r.res.set_content(x.str(), "application/xml");
  return std::nullopt;
}

}  // namespace tierfs::gateway
