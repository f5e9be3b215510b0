// Bucket operations: ListBuckets, HeadBucket, CreateBucket, DeleteBucket, ListObjects (V1
// and V2), DeleteObjects, GetBucketLocation and the configuration subresources a client may
// ask for (answered as S3 answers a bucket without them, or NotImplemented).
#include <pwd.h>

#include <map>

#include "gateway/checksums.h"
#include "gateway/listing.h"
#include "gateway/s3_service.h"
#include "gateway/xml_out.h"
#include "object/s3_sign.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

const char kNs[] = "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

std::string UserName(uint32_t uid) {
  struct passwd pw, *res = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return std::to_string(uid);
}

// Continuation tokens say where the last page ended (stateless): base64url of the last key.
std::string Token(const std::string& last) {
  std::string t = Base64Encode("tfs1:" + last);
  for (char& ch : t) {
    if (ch == '+') ch = '-';
    if (ch == '/') ch = '_';
  }
  return t;
}
std::optional<std::string> FromToken(std::string t) {
  for (char& ch : t) {
    if (ch == '-') ch = '+';
    if (ch == '_') ch = '/';
  }
  auto raw = Base64Decode(t);
  if (!raw || raw->rfind("tfs1:", 0) != 0) return std::nullopt;
  return raw->substr(5);
}

// Subresources of a bucket that this gateway does not keep, with what S3 answers for a bucket
// that has none of them (so clients that ask take "none"), or "" for NotImplemented.
struct Sub {
  const char* name;
  int http;
  const char* code;
};
const Sub kMissingConfig[] = {
    {"policy", 404, "NoSuchBucketPolicy"},       {"lifecycle", 404, "NoSuchLifecycleConfiguration"},
    {"cors", 404, "NoSuchCORSConfiguration"},    {"tagging", 404, "NoSuchTagSet"},
    {"website", 404, "NoSuchWebsiteConfiguration"},
    {"encryption", 404, "ServerSideEncryptionConfigurationNotFoundError"},
    {"object-lock", 404, "ObjectLockConfigurationNotFoundError"},
    {"replication", 404, "ReplicationConfigurationNotFoundError"},
    {"ownershipControls", 404, "OwnershipControlsNotFoundError"},
};

}  // namespace

std::optional<S3Error> S3Service::ListBuckets(S3Req& r) {
  if (r.id.access_key.empty()) return AccessDenied("ListBuckets needs credentials");
  auto buckets = objects_->Buckets(r.caller);
  if (!buckets.ok()) return buckets.error();
  Xml x;
  x.Open("ListAllMyBucketsResult", kNs);
  x.Open("Owner").Leaf("ID", r.user.access_key).Leaf("DisplayName", r.user.display_name.empty() ? r.user.access_key : r.user.display_name).Close("Owner");
  x.Open("Buckets");
  for (const auto& b : *buckets) {
    if (opts_.multi_buckets && !r.user.all_buckets) {
      auto ino = objects_->Bucket(r.caller, b.name);
      if (!ino.ok()) continue;
      auto a = objects_->vfs()->meta()->GetAttr(*ino);
      if (!a.ok() || !r.user.MaySee(b.name, a->uid)) continue;
    }
    x.Open("Bucket").Leaf("Name", b.name).Leaf("CreationDate", Iso8601(b.created_ns)).Close("Bucket");
  }
  x.Close("Buckets").Close("ListAllMyBucketsResult");
  r.res.set_content(x.str(), "application/xml");
  return std::nullopt;
}

std::optional<S3Error> S3Service::BucketOp(S3Req& r) {
  if (r.method == "PUT" && r.auth.query.empty()) {
    r.op = "CreateBucket";
    r.body_read = true;
    (*r.body)([](const char*, size_t) { return true; });  // a location constraint, if any: one region here
    auto made = objects_->CreateBucket(r.caller, r.bucket);
    if (!made.ok()) return made.error();
    r.res.set_header("Location", "/" + r.bucket);
    return std::nullopt;
  }
  auto bucket = objects_->Bucket(r.caller, r.bucket);
  if (!bucket.ok()) return bucket.error();
  if (opts_.multi_buckets && !r.user.all_buckets) {
    auto a = objects_->vfs()->meta()->GetAttr(*bucket);
    if (!a.ok() || !r.user.MaySee(r.bucket, a->uid)) return AccessDenied();
  }
  r.bucket_ino = *bucket;
  if (r.method == "DELETE" && r.auth.query.empty()) {
    r.op = "DeleteBucket";
    auto d = objects_->DeleteBucket(r.caller, r.bucket);
    if (!d.ok()) return d.error();
    r.res.status = 204;
    return std::nullopt;
  }
  if (r.method == "HEAD") {
    r.op = "HeadBucket";
    r.res.set_header("x-amz-bucket-region", opts_.region);
    return std::nullopt;
  }
  if (r.method == "POST" && r.HasParam("delete")) {
    r.op = "DeleteObjects";
    return DeleteObjects(r, *bucket);
  }
  if (r.HasParam("uploads")) return MultipartOp(r, *bucket);
  if (r.method != "GET") {
    r.op = "Bucket_" + r.method;
    return NotImplemented("this bucket operation (" + r.method + " with its subresource)");
  }
  if (r.HasParam("location")) {
    r.op = "GetBucketLocation";
    // us-east-1 is an empty constraint, as S3 answers it.
    std::string s = Xml().str() + "<LocationConstraint " + kNs + ">" +
                    (opts_.region == "us-east-1" ? std::string() : XmlEscape(opts_.region)) + "</LocationConstraint>";
    r.res.set_content(s, "application/xml");
    return std::nullopt;
  }
  if (r.HasParam("versioning")) {
    r.op = "GetBucketVersioning";
    Xml x;
    x.Open("VersioningConfiguration", kNs).Close("VersioningConfiguration");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  if (r.HasParam("acl")) {
    r.op = "GetBucketAcl";
    Xml x;
    x.Open("AccessControlPolicy", kNs).Open("Owner").Leaf("ID", r.user.access_key).Close("Owner");
    x.Open("AccessControlList").Open("Grant");
    x.Open("Grantee", "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\"")
        .Leaf("ID", r.user.access_key)
        .Close("Grantee");
    x.Leaf("Permission", "FULL_CONTROL").Close("Grant").Close("AccessControlList").Close("AccessControlPolicy");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  for (const Sub& s : kMissingConfig) {
    if (r.HasParam(s.name)) {
      r.op = std::string("GetBucket_") + s.name;
      return Err(s.http, s.code, std::string("The bucket has no ") + s.name + " configuration (TierFS keeps none)");
    }
  }
  for (const char* sub : {"notification", "logging", "accelerate", "requestPayment", "analytics", "metrics",
                          "inventory", "intelligent-tiering", "versions", "publicAccessBlock"}) {
    if (r.HasParam(sub)) {
      r.op = std::string("GetBucket_") + sub;
      return NotImplemented(std::string("the bucket subresource '") + sub + "'");
    }
  }
  bool v2 = r.Param("list-type") == "2";
  r.op = v2 ? "ListObjectsV2" : "ListObjects";
  return ListObjects(r, *bucket, v2);
}

std::optional<S3Error> S3Service::ListObjects(S3Req& r, Ino bucket, bool v2) {
  ListRequest q;
  q.prefix = r.Param("prefix");
  q.delimiter = r.Param("delimiter");
  std::string max = r.Param("max-keys");
  if (!max.empty()) {
    if (max.find_first_not_of("0123456789") != std::string::npos || max.size() > 9) {
      return InvalidArgument("Provided max-keys not an integer or within integer range");
    }
    q.max_keys = std::min<size_t>(std::stoul(max), 1000);
  }
  std::string encoding = r.Param("encoding-type");
  if (!encoding.empty() && encoding != "url") return InvalidArgument("Invalid Encoding Method specified in Request");
  const bool url = encoding == "url";
  auto enc = [&](const std::string& s) { return url ? UriEncode(s, true) : s; };
  std::string token = r.Param("continuation-token");
  if (v2) {
    if (r.HasParam("continuation-token")) {
      auto k = FromToken(token);
      if (!k) return InvalidArgument("The continuation token provided is incorrect");
      q.start_after = *k;
    } else {
      q.start_after = r.Param("start-after");
    }
  } else {
    q.start_after = r.Param("marker");
  }
  Lister lister(objects_);
  auto res = lister.List(r.caller, bucket, q);
  if (!res.ok()) return res.error();
  const bool owner = !v2 || r.Param("fetch-owner") == "true";
  std::map<uint32_t, std::string> names;  // uid -> user name: one passwd lookup per owner, not per key
  auto name_of = [&](uint32_t uid) -> const std::string& {
    auto it = names.find(uid);
    if (it == names.end()) it = names.emplace(uid, UserName(uid)).first;
    return it->second;
  };
  Xml x;
  x.Open("ListBucketResult", kNs);
  x.Leaf("Name", r.bucket).Leaf("Prefix", enc(q.prefix));
  if (v2) {
    if (r.HasParam("continuation-token")) x.Leaf("ContinuationToken", token);
    if (r.HasParam("start-after")) x.Leaf("StartAfter", enc(r.Param("start-after")));
    x.Leaf("KeyCount", std::to_string(res->objects.size() + res->prefixes.size()));
  } else {
    x.Leaf("Marker", enc(q.start_after));
  }
  x.Leaf("MaxKeys", std::to_string(q.max_keys));
  if (!q.delimiter.empty()) x.Leaf("Delimiter", enc(q.delimiter));
  if (url) x.Leaf("EncodingType", "url");
  x.Leaf("IsTruncated", res->truncated ? "true" : "false");
  if (res->truncated) {
    if (v2) {
      x.Leaf("NextContinuationToken", Token(res->last));
    } else if (!q.delimiter.empty()) {
      x.Leaf("NextMarker", enc(res->last));
    }
  }
  for (const auto& o : res->objects) {
    x.Open("Contents").Leaf("Key", enc(o.key)).Leaf("LastModified", Iso8601(o.info.attr.mtime_ns));
    x.Leaf("ETag", "\"" + o.info.meta.etag + "\"");
    x.Leaf("Size", std::to_string(o.info.dir ? 0 : o.info.attr.length));
    if (owner) {
      x.Open("Owner").Leaf("ID", std::to_string(o.info.attr.uid)).Leaf("DisplayName", name_of(o.info.attr.uid)).Close("Owner");
    }
    x.Leaf("StorageClass", "STANDARD").Close("Contents");
  }
  for (const auto& p : res->prefixes) x.Open("CommonPrefixes").Leaf("Prefix", enc(p)).Close("CommonPrefixes");
  x.Close("ListBucketResult");
  r.res.set_content(x.str(), "application/xml");
  return std::nullopt;
}

}  // namespace tierfs::gateway
