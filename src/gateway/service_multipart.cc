// Multipart uploads over HTTP: CreateMultipartUpload (POST ?uploads), UploadPart (PUT
// ?partNumber&uploadId), UploadPartCopy (the same with x-amz-copy-source), ListParts (GET
// ?uploadId), CompleteMultipartUpload (POST ?uploadId), AbortMultipartUpload (DELETE
// ?uploadId) and ListMultipartUploads (GET on the bucket with ?uploads). The volume side
// is multipart.h.
#include "common/clock.h"
#include "gateway/checksums.h"
#include "gateway/multipart.h"
#include "gateway/s3_service.h"
#include "gateway/xml_out.h"

namespace tierfs::gateway {
namespace {

const char kNs[] = "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";
constexpr int64_t kCleanEveryNs = 3600LL * 1000000000;

// "bytes=FIRST-LAST" of x-amz-copy-source-range, within size.
bool CopyRange(const std::string& v, uint64_t size, uint64_t* off, uint64_t* len) {
  if (v.empty()) {
    *off = 0;
    *len = size;
    return true;
  }
  if (v.rfind("bytes=", 0) != 0) return false;
  size_t dash = v.find('-', 6);
  if (dash == std::string::npos) return false;
  try {
    uint64_t first = std::stoull(v.substr(6, dash - 6));
    uint64_t last = std::stoull(v.substr(dash + 1));
    if (first > last || last >= size) return false;
    *off = first;
    *len = last - first + 1;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::optional<S3Error> S3Service::MultipartOp(S3Req& r, Ino bucket) {
  Multipart& mp = *multipart_;
  const int64_t now = MonoNanos();
  if (now - last_upload_clean_ns_.load() > kCleanEveryNs) {
    last_upload_clean_ns_ = now;
    mp.CleanOlderThan(static_cast<int64_t>(opts_.upload_max_age_s) * 1000000000);
  }
  if (r.key.empty()) {
    // ListMultipartUploads on the bucket.
    r.op = "ListMultipartUploads";
    if (r.method != "GET") return NotImplemented("this bucket operation");
    auto ups = mp.List(r.caller, bucket);
    if (!ups.ok()) return ups.error();
    const std::string prefix = r.Param("prefix");
    Xml x;
    x.Open("ListMultipartUploadsResult", kNs).Leaf("Bucket", r.bucket).Leaf("KeyMarker", "").Leaf("UploadIdMarker", "");
    x.Leaf("Prefix", prefix).Leaf("MaxUploads", "1000").Leaf("IsTruncated", "false");
    for (const auto& u : *ups) {
      if (u.key.rfind(prefix, 0) != 0) continue;
      x.Open("Upload").Leaf("Key", u.key).Leaf("UploadId", u.id).Leaf("Initiated", Iso8601(u.initiated_ns));
      x.Leaf("StorageClass", "STANDARD").Close("Upload");
    }
    x.Close("ListMultipartUploadsResult");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  if (r.method == "POST" && r.HasParam("uploads")) {
    r.op = "CreateMultipartUpload";
    auto meta = MetaFromHeaders(r);
    if (!meta.ok()) return meta.error();
    auto u = mp.Create(r.caller, bucket, r.key, *meta);
    if (!u.ok()) return u.error();
    Xml x;
    x.Open("InitiateMultipartUploadResult", kNs).Leaf("Bucket", r.bucket).Leaf("Key", r.key).Leaf("UploadId", u->id);
    x.Close("InitiateMultipartUploadResult");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  auto u = mp.Find(r.caller, bucket, r.key, r.Param("uploadId"));
  if (!u.ok()) return u.error();
  if (r.method == "PUT") {
    const std::string pn = r.Param("partNumber");
    int number = 0;
    if (!pn.empty() && pn.size() <= 5 && pn.find_first_not_of("0123456789") == std::string::npos) number = std::stoi(pn);
    if (number < 1 || number > kMaxParts) {
      return InvalidArgument("Part number must be an integer between 1 and 10000, inclusive");
    }
    if (r.HasHeader("x-amz-copy-source")) {
      r.op = "UploadPartCopy";
      auto src = CopySource(r);
      if (!src.ok()) return src.error();
      uint64_t off = 0, len = 0;
      if (!CopyRange(r.Header("x-amz-copy-source-range"), src->attr.length, &off, &len)) {
        return Err(400, "InvalidRange", "The x-amz-copy-source-range value must be of the form bytes=first-last where "
                                        "first and last are the zero-based offsets of the first and last bytes to copy");
      }
      auto part = mp.CopyPart(r.caller, *u, number, *src, off, len);
      if (!part.ok()) return part.error();
      Xml x;
      x.Open("CopyPartResult", kNs).Leaf("LastModified", Iso8601(part->mtime_ns));
      x.Leaf("ETag", "\"" + part->etag + "\"").Close("CopyPartResult");
      r.res.set_content(x.str(), "application/xml");
      return std::nullopt;
    }
    r.op = "UploadPart";
    if (r.Header("content-length").empty() && r.Header("x-amz-decoded-content-length").empty() &&
        r.Header("transfer-encoding").find("chunked") == std::string::npos) {
      return Err(411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
    }
    auto put = mp.BeginPart(r.caller, *u);
    if (!put.ok()) return put.error();
    BodyResult br;
    Objects::PutStream* stream = put->get();
    if (auto e = ReadBody(r, [&](std::string_view d) { return stream->Write(d); }, &br)) return e;
    stream->SetMd5(br.md5_hex);
    auto part = mp.FinishPart(r.caller, *u, number, std::move(*put));
    if (!part.ok()) return part.error();
    r.res.set_header("ETag", "\"" + part->etag + "\"");
    for (const auto& [algo, v] : br.checksums) {
      if (auto a = ParseChecksumAlgo(algo)) r.res.set_header(ChecksumHeader(*a), v);
    }
    return std::nullopt;
  }
  if (r.method == "GET") {
    r.op = "ListParts";
    auto parts = mp.Parts(r.caller, *u);
    if (!parts.ok()) return parts.error();
    Xml x;
    x.Open("ListPartsResult", kNs).Leaf("Bucket", r.bucket).Leaf("Key", r.key).Leaf("UploadId", u->id);
    x.Leaf("PartNumberMarker", "0").Leaf("MaxParts", "10000").Leaf("IsTruncated", "false");
    x.Leaf("StorageClass", "STANDARD");
    for (const auto& p : *parts) {
      x.Open("Part").Leaf("PartNumber", std::to_string(p.number)).Leaf("LastModified", Iso8601(p.mtime_ns));
      x.Leaf("ETag", "\"" + p.etag + "\"").Leaf("Size", std::to_string(p.size)).Close("Part");
    }
    x.Close("ListPartsResult");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  if (r.method == "DELETE") {
    r.op = "AbortMultipartUpload";
    auto done = mp.Abort(r.caller, *u);
    if (!done.ok()) return done.error();
    r.res.status = 204;
    return std::nullopt;
  }
  if (r.method == "POST") {
    r.op = "CompleteMultipartUpload";
    auto cond = WriteConditions(r);
    if (!cond.ok()) return cond.error();
    auto body = ReadSmallBody(r, 4 << 20);
    if (!body.ok()) return body.error();
    auto listed = ParseCompleteMultipart(*body);
    if (!listed.ok()) return listed.error();
    std::vector<std::pair<int, std::string>> parts;
    for (const auto& p : *listed) parts.emplace_back(p.number, p.etag);
    auto info = mp.Complete(r.caller, *u, parts, *cond);
    if (!info.ok()) return info.error();
    Xml x;
    x.Open("CompleteMultipartUploadResult", kNs).Leaf("Location", "/" + r.bucket + "/" + r.key);
    x.Leaf("Bucket", r.bucket).Leaf("Key", r.key).Leaf("ETag", "\"" + info->meta.etag + "\"");
    x.Close("CompleteMultipartUploadResult");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  return NotImplemented("this multipart request");
}

}  // namespace tierfs::gateway
