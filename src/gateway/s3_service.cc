#include "gateway/s3_service.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <cctype>
#include <cstdlib>
#include <ctime>

#include "common/clock.h"
#include "gateway/aws_chunked.h"
#include "gateway/checksums.h"
#include "gateway/multipart.h"
#include "gateway/xml_out.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

constexpr size_t kMaxUserMeta = 2048;  // S3: 2 KB of user metadata
// Headers stored with an object and returned with it, as S3 does.
const char* const kStoredHeaders[] = {"cache-control", "content-disposition", "content-language", "expires"};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string RequestId(uint64_t n) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint64_t>(MonoNanos());
  char buf[40];
  snprintf(buf, sizeof buf, "%08llX%08llX", static_cast<unsigned long long>(r & 0xffffffff),
           static_cast<unsigned long long>(n));
  return buf;
}

std::string Unquote(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.rfind("W/", 0) == 0) s = s.substr(2);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

// Whether any ETag of a comma-separated If-Match / If-None-Match list matches ("*" does).
bool EtagListMatches(const std::string& list, const std::string& etag) {
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    std::string e = Unquote(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (e == "*" || e == etag) return true;
    if (comma == std::string::npos) return false;
    start = comma + 1;
  }
}

}  // namespace

bool S3Req::HasHeader(std::string_view lower_name) const {
  for (const auto& [n, v] : auth.headers) {
    if (n == lower_name) return true;
  }
  return false;
}

S3Service::S3Service(Objects* objects, Users* users, const GatewayOptions& opts)
    : objects_(objects), users_(users), opts_(opts), multipart_(std::make_unique<Multipart>(objects)) {}

S3Service::~S3Service() = default;

void S3Service::Serve(const httplib::Request& http, httplib::Response& res, const httplib::ContentReader* body) {
  const int64_t start = MonoNanos();
  S3Req r{http, res, body};
  r.method = http.method;
  r.request_id = RequestId(next_id_++);
  for (const auto& [name, value] : http.headers) {
    std::string n = Lower(name);
    if (n == "remote_addr" || n == "remote_port" || n == "local_addr" || n == "local_port") continue;
    bool joined = false;
    for (auto& [an, av] : r.auth.headers) {
      if (an == n) {
        av += "," + value;
        joined = true;
      }
    }
    if (!joined) r.auth.headers.emplace_back(n, value);
  }
  for (const auto& [name, value] : http.params) r.auth.query.emplace_back(name, value);
  r.auth.method = r.method;
  r.auth.path = http.path;
  r.auth.now_s = static_cast<int64_t>(time(nullptr));
  // Bucket and key: virtual-host style (BUCKET.DOMAIN) or path style (/BUCKET/KEY).
  std::string path = http.path;
  std::string host = r.Header("host");
  if (size_t colon = host.rfind(':'); colon != std::string::npos && host.find(']') == std::string::npos) {
    host = host.substr(0, colon);
  }
  if (!opts_.domain.empty() && host.size() > opts_.domain.size() + 1 &&
      host.compare(host.size() - opts_.domain.size(), std::string::npos, opts_.domain) == 0 &&
      host[host.size() - opts_.domain.size() - 1] == '.') {
    r.bucket = host.substr(0, host.size() - opts_.domain.size() - 1);
    r.key = path.size() > 1 ? path.substr(1) : "";
  } else if (path.size() > 1) {
    size_t slash = path.find('/', 1);
    r.bucket = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    if (slash != std::string::npos) r.key = path.substr(slash + 1);
  }
  r.resource = "/" + r.bucket + (r.key.empty() ? "" : "/" + r.key);
  res.set_header("x-amz-request-id", r.request_id);
  res.set_header("Server", "TierFS");
  std::optional<S3Error> err = Authenticate(r);
  if (!err) err = Dispatch(r);
  if (err) Fail(r, *err);
  if (res.status == -1) res.status = 200;
  if (observer_) {
    // Bytes accepted: the body of a request that succeeded (its decoded length when it came
    // aws-chunked); bytes sent: the response's body, whole or streamed.
    uint64_t in = 0;
    if (res.status / 100 == 2) {
      std::string len = r.Header("x-amz-decoded-content-length");
      if (len.empty()) len = r.Header("content-length");
      in = std::strtoull(len.c_str(), nullptr, 10);
    }
    observer_(r, res.status, MonoNanos() - start, in, res.body.size() + res.content_length_);
  }
}

std::optional<S3Error> S3Service::Authenticate(S3Req& r) {
  auto id = gateway::Authenticate(
      r.auth,
      [&](const std::string& ak) -> std::optional<std::string> {
        auto u = users_->Find(ak);
        if (!u) return std::nullopt;
        return u->secret_key;
      },
      opts_.anonymous);
  if (!id.ok()) return id.error();
  r.id = *id;
  if (r.id.access_key.empty()) {
    // Anonymous: nobody, reading what everybody may read.
    r.user.access_key = "";
    r.user.uid = r.user.gid = 65534;
    r.user.read_only = true;
    r.user.all_buckets = true;
    r.user.display_name = "anonymous";
  } else {
    auto u = users_->Find(r.id.access_key);
    if (!u) return Err(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
    r.user = *u;
  }
  r.caller.access_key = r.user.access_key;
  r.caller.read_only = r.user.read_only;
  r.caller.ctx.uid = r.user.uid;
  r.caller.ctx.gid = r.user.gid;
  r.caller.ctx.umask = opts_.umask;
  return std::nullopt;
}

std::optional<S3Error> S3Service::Dispatch(S3Req& r) {
  if (r.bucket.empty()) {
    if (r.method == "GET" || r.method == "HEAD") {
      r.op = "ListBuckets";
      return ListBuckets(r);
    }
    return Err(405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
  }
  if (r.key.empty()) return BucketOp(r);
  auto bucket = objects_->Bucket(r.caller, r.bucket);
  if (!bucket.ok()) return bucket.error();
  if (opts_.multi_buckets && !r.user.all_buckets) {
    auto a = objects_->vfs()->meta()->GetAttr(*bucket);
    if (!a.ok() || !r.user.MaySee(r.bucket, a->uid)) return AccessDenied();
  }
  r.bucket_ino = *bucket;
  if (r.HasParam("uploadId") || (r.method == "POST" && r.HasParam("uploads"))) return MultipartOp(r, *bucket);
  if (r.HasParam("tagging") && r.method == "GET") {
    // TierFS keeps no object tags: an existing object has none (awscli asks when it copies
    // an object between buckets; setting tags is not implemented).
    r.op = "GetObjectTagging";
    auto o = objects_->Head(r.caller, *bucket, r.key);
    if (!o.ok()) return o.error();
    Xml x;
    x.Open("Tagging", "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"").Open("TagSet").Close("TagSet").Close("Tagging");
    r.res.set_content(x.str(), "application/xml");
    return std::nullopt;
  }
  for (const char* sub : {"acl", "tagging", "retention", "legal-hold", "torrent", "attributes", "restore", "select"}) {
    if (r.HasParam(sub)) {
      if (std::string(sub) == "acl" && (r.method == "GET" || r.method == "HEAD")) break;  // answered below
      r.op = std::string("Object_") + sub;
      return NotImplemented(std::string("the ") + sub + " subresource");
    }
  }
  if (r.method == "GET" || r.method == "HEAD") {
    if (r.HasParam("acl")) {
      r.op = "GetObjectAcl";
      auto o = objects_->Head(r.caller, *bucket, r.key);
      if (!o.ok()) return o.error();
      Xml x;
      x.Open("AccessControlPolicy").Open("Owner").Leaf("ID", std::to_string(o->attr.uid)).Close("Owner");
      x.Open("AccessControlList").Open("Grant");
      x.Open("Grantee", "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\"")
          .Leaf("ID", std::to_string(o->attr.uid))
          .Close("Grantee");
      x.Leaf("Permission", "FULL_CONTROL").Close("Grant").Close("AccessControlList").Close("AccessControlPolicy");
      r.res.set_content(x.str(), "application/xml");
      return std::nullopt;
    }
    r.op = r.method == "GET" ? "GetObject" : "HeadObject";
    return GetObject(r, r.method == "HEAD");
  }
  if (r.method == "PUT") {
    if (r.HasHeader("x-amz-copy-source")) {
      r.op = "CopyObject";
      return CopyObject(r);
    }
    r.op = "PutObject";
    return PutObject(r);
  }
  if (r.method == "DELETE") {
    r.op = "DeleteObject";
    return DeleteObject(r);
  }
  return Err(405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
}

void S3Service::Fail(S3Req& r, const S3Error& e) {
  if (r.body && !r.body_read) {
    // The body was not read. A small one is read away so that the connection can carry the
    // next request; a large or unknown one is not (a client announcing 5 GiB and sending
    // less would hold this thread until the read timeout): the answer closes the
    // connection instead. (A client that sent Expect: 100-continue was answered before it.)
    r.body_read = true;
    constexpr uint64_t kDrainAtMost = 1 << 20;
    const std::string len = r.Header("content-length");
    if (!len.empty() && std::strtoull(len.c_str(), nullptr, 10) <= kDrainAtMost) {
      (*r.body)([](const char*, size_t) { return true; });
    } else {
      r.res.set_header("Connection", "close");
    }
  }
  r.res.status = e.http;
  if (e.http == 304) return;  // Not Modified: headers only, the ETag a 200 would have among them
  r.res.headers.erase("ETag");
  if (e.code == "InternalError" || e.http >= 500) {
    spdlog::warn("gateway: {} {} answered {} {}: {}", r.method, r.resource, e.http, e.code, e.message);
  }
  if (r.method == "HEAD") {
    r.res.set_header("x-amz-error-code", e.code);
    return;
  }
  r.res.set_content(ErrorXml(e, r.resource, r.request_id), "application/xml");
}

std::optional<S3Error> S3Service::ReadBody(S3Req& r,
                                           const std::function<std::optional<S3Error>(std::string_view)>& sink,
                                           BodyResult* out) {
  r.body_read = true;
  if (!r.body) return std::nullopt;
  // Which checksum the client sends (a header, or a trailer announced in x-amz-trailer).
  std::optional<ChecksumAlgo> algo;
  std::string expect;
  std::string named = r.Header("x-amz-checksum-algorithm");
  if (named.empty()) named = r.Header("x-amz-sdk-checksum-algorithm");
  if (!named.empty()) {
    algo = ParseChecksumAlgo(named);
    if (!algo) return InvalidArgument("x-amz-checksum-algorithm '" + named + "' is not one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256");
  }
  for (ChecksumAlgo a : {ChecksumAlgo::kCrc32, ChecksumAlgo::kCrc32c, ChecksumAlgo::kCrc64Nvme, ChecksumAlgo::kSha1,
                         ChecksumAlgo::kSha256}) {
    std::string v = r.Header(ChecksumHeader(a));
    if (v.empty()) continue;
    if (algo && *algo != a) return InvalidArgument("x-amz-checksum-algorithm and the checksum header do not agree");
    algo = a;
    expect = v;
  }
  std::string trailer = Lower(r.Header("x-amz-trailer"));
  if (!trailer.empty()) {
    auto t = ParseChecksumAlgo(trailer.rfind("x-amz-checksum-", 0) == 0 ? trailer.substr(15) : "");
    if (!t) return InvalidArgument("x-amz-trailer '" + trailer + "' is not a checksum this gateway knows");
    algo = t;
  }
  Checksummer md5(ChecksumAlgo::kMd5);
  std::optional<Checksummer> sha;
  if (r.id.payload == Payload::kHashed) sha.emplace(ChecksumAlgo::kSha256);
  std::optional<Checksummer> cks;
  if (algo) cks.emplace(*algo);
  std::optional<S3Error> err;
  uint64_t size = 0;
  auto pass = [&](std::string_view data) -> std::optional<S3Error> {
    md5.Update(data);
    if (sha) sha->Update(data);
    if (cks) cks->Update(data);
    size += data.size();
    return sink(data);
  };
  const bool chunked = r.id.payload == Payload::kStreamingSigned || r.id.payload == Payload::kStreamingSignedTrailer ||
                       r.id.payload == Payload::kStreamingUnsignedTrailer;
  std::optional<ChunkedDecoder> dec;
  if (chunked) dec.emplace(r.id, pass);
  bool complete = (*r.body)([&](const char* data, size_t n) {
    err = dec ? dec->Feed(std::string_view(data, n)) : pass(std::string_view(data, n));
    return !err.has_value();
  });
  if (err) return err;
  if (!complete) {
    return Err(400, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header");
  }
  if (dec) {
    if (auto e = dec->Finish()) return e;
    std::string decoded = r.Header("x-amz-decoded-content-length");
    if (!decoded.empty() && decoded != std::to_string(size)) {
      return Err(400, "IncompleteBody", "the body's decoded length is not x-amz-decoded-content-length");
    }
    if (algo && expect.empty()) {
      auto it = dec->trailers().find(ChecksumHeader(*algo));
      if (it != dec->trailers().end()) expect = it->second;
    }
  }
  if (sha && HexOf(sha->Digest()) != r.id.payload_sha256) {
    return Err(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
  out->size = size;
  std::string md5_raw = md5.Digest();
  out->md5_hex = HexOf(md5_raw);
  std::string content_md5 = r.Header("content-md5");
  if (!content_md5.empty()) {
    auto want = Base64Decode(content_md5);
    if (!want || want->size() != 16) return Err(400, "InvalidDigest", "The Content-MD5 you specified was not valid.");
    if (*want != md5_raw) return Err(400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
  }
  if (cks) {
    std::string got = Base64Encode(cks->Digest());
    if (!expect.empty() && expect != got) {
      return Err(400, "BadDigest", "The " + ChecksumHeader(*algo) + " you specified did not match the calculated checksum.");
    }
    out->checksums[AlgoName(*algo)] = got;
  }
  return std::nullopt;
}

S3Result<std::string> S3Service::ReadSmallBody(S3Req& r, size_t max) {
  std::string body;
  BodyResult br;
  auto e = ReadBody(
      r,
      [&](std::string_view d) -> std::optional<S3Error> {
        if (body.size() + d.size() > max) return Err(400, "MaxMessageLengthExceeded", "Your request was too big.");
        body.append(d);
        return std::nullopt;
      },
      &br);
  if (e) return *e;
  return body;
}

void S3Service::ObjectHeaders(S3Req& r, const ObjectInfo& o) {
  r.res.set_header("ETag", "\"" + o.meta.etag + "\"");
  r.res.set_header("Last-Modified", HttpDate(o.attr.mtime_ns));
  r.res.set_header("Accept-Ranges", "bytes");
  for (const auto& [k, v] : o.meta.user) r.res.set_header("x-amz-meta-" + k, v);
  for (const auto& [k, v] : o.meta.headers) r.res.set_header(k, v);
  if (o.meta.parts) r.res.set_header("x-amz-mp-parts-count", std::to_string(o.meta.parts));
  if (Lower(r.Header("x-amz-checksum-mode")) == "enabled") {
    for (const auto& [algo, v] : o.meta.checksums) {
      if (auto a = ParseChecksumAlgo(algo)) r.res.set_header(ChecksumHeader(*a), v);
    }
  }
}

std::optional<S3Error> S3Service::ReadConditions(S3Req& r, const ObjectInfo& o, const std::string& prefix) {
  const bool copy = !prefix.empty();
  auto failed = [] { return PreconditionFailed(); };
  const int64_t mtime_s = o.attr.mtime_ns / 1000000000;
  std::string if_match = r.Header(prefix + "if-match");
  std::string if_none = r.Header(prefix + "if-none-match");
  std::string if_unmod = r.Header(prefix + "if-unmodified-since");
  std::string if_mod = r.Header(prefix + "if-modified-since");
  if (!if_match.empty()) {
    if (!EtagListMatches(if_match, o.meta.etag)) return failed();
  } else if (!if_unmod.empty()) {
    int64_t t = ParseHttpDate(if_unmod);
    if (t >= 0 && mtime_s > t / 1000000000) return failed();
  }
  if (!if_none.empty()) {
    if (EtagListMatches(if_none, o.meta.etag)) {
      if (copy) return failed();
      r.res.set_header("ETag", "\"" + o.meta.etag + "\"");
      r.res.set_header("Last-Modified", HttpDate(o.attr.mtime_ns));
      return Err(304, "NotModified", "Not Modified");
    }
  } else if (!if_mod.empty()) {
    int64_t t = ParseHttpDate(if_mod);
    if (t >= 0 && mtime_s <= t / 1000000000) {
      if (copy) return failed();
      r.res.set_header("ETag", "\"" + o.meta.etag + "\"");
      r.res.set_header("Last-Modified", HttpDate(o.attr.mtime_ns));
      return Err(304, "NotModified", "Not Modified");
    }
  }
  return std::nullopt;
}

S3Result<WriteCondition> S3Service::WriteConditions(S3Req& r) {
  WriteCondition c;
  std::string none = r.Header("if-none-match");
  if (!none.empty()) {
    if (Unquote(none) != "*") return NotImplemented("If-None-Match with an ETag on a write (only '*')");
    c.if_none_match_any = true;
  }
  std::string match = r.Header("if-match");
  if (!match.empty()) c.if_match = Unquote(match);
  return c;
}

S3Result<ObjectMeta> S3Service::MetaFromHeaders(S3Req& r) {
  ObjectMeta m;
  m.content_type = r.Header("content-type");
  size_t user_bytes = 0;
  for (const auto& [n, v] : r.auth.headers) {
    if (n.rfind("x-amz-meta-", 0) == 0) {
      m.user[n.substr(11)] = v;
      user_bytes += n.size() - 11 + v.size();
    }
  }
  if (user_bytes > kMaxUserMeta) {
    return Err(400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.");
  }
  for (const char* h : kStoredHeaders) {
    std::string v = r.Header(h);
    if (!v.empty()) m.headers[h] = v;
  }
  std::string enc = r.Header("content-encoding");
  if (!enc.empty()) {
    // aws-chunked is how the body was sent, not what the object is.
    std::string kept;
    size_t start = 0;
    for (;;) {
      size_t comma = enc.find(',', start);
      std::string e = Unquote(enc.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!e.empty() && e != "aws-chunked") kept += (kept.empty() ? "" : ",") + e;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!kept.empty()) m.headers["content-encoding"] = kept;
  }
  return m;
}

}  // namespace tierfs::gateway
