#include "object/s3_store.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <random>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/url.h"
#include "object/http_client.h"
#include "object/http_retry.h"
#include "object/list_level.h"
#include "object/s3_sign.h"
#include "object/s3_xml.h"

namespace tierfs {
namespace {

constexpr char kUrlForms[] = "http(s)://HOST[:PORT]/BUCKET or http(s)://BUCKET.HOST[:PORT]";
constexpr char kDefaultRegion[] = "us-east-1";
// ListObjectsV2 answers at most 1000 keys per request.
constexpr size_t kListPage = 1000;
constexpr int kMaxTries = 20;
constexpr int kMaxPartNumber = 10000;
// The user-metadata header that carries ChecksumStore's table (ObjectStore::PutWithMeta).
constexpr char kMetaHeader[] = "x-amz-meta-tierfs";

bool ValidBucketName(const std::string& b) {
  if (b.empty() || b.size() > 255) return false;
  return std::all_of(b.begin(), b.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
  });
}

bool IsIpv4(const std::string& host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

Status BadUrl(const std::string& url, const std::string& why) {
  return Status::Err(EINVAL, "bad S3 bucket URL '" + url + "': " + why + " (expected " + kUrlForms +
                                 ", optionally followed by ?region=R&tries=N&timeout=SECONDS)");
}

// S3 error codes that mean "try again", whatever the HTTP status: RequestTimeout is a 400
// that only says the server got tired of waiting for our body.
bool RetryableCode(const std::string& code) {
  return code == "RequestTimeout" || code == "SlowDown" || code == "InternalError" || code == "ServiceUnavailable";
}

std::string RandomHex() {
  std::mt19937_64& rng = ThreadRng();  // seeded again after fork()
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

class S3Store : public ObjectStore {
 public:
  S3Store(S3Location loc, SigV4Credentials creds)
      : loc_(std::move(loc)),
        creds_(std::move(creds)),
        http_(HttpClientOptions{.connect_timeout_ms = loc_.connect_timeout_s * 1000,
                                .io_timeout_s = loc_.io_timeout_s,
                                .total_timeout_ms = 0,  // large objects take what they take
                                .max_idle_handles = 64,
                                .tls = {}}) {}

  std::string Describe() const override { return loc_.Describe(); }
  Status Init() override;
  Status Put(const std::string& key, std::string_view data) override { return PutParts(key, {data}); }
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override;
  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    return GetWithMeta(key, off, len, nullptr);
  }
  bool HasObjectMeta() const override { return true; }
  Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) override;
  Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override;
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override;
  // One ListObjectsV2 request: up to max keys from token (else start_after), rolled up at
  // '/' with delimit.
  Result<ListObjectsPage> ListPage(const std::string& prefix, const std::string& token, const std::string& start_after,
                                   size_t max, bool delimit, const std::string& what);
  Result<std::string> CreateMultipart(const std::string& key) override;
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override;
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override;
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override;

 private:
  struct Call {
    std::string method;
    std::string key;  // "" addresses the bucket itself
    HeaderList query;
    HeaderList headers;  // besides host and the x-amz-* headers Send adds
    std::vector<std::string_view> body;
    // CompleteMultipartUpload may answer 200 and report a failure in the body.
    bool error_in_200 = false;
  };
  struct Reply {
    HttpResponse response;
    int tries = 0;  // attempts made; > 1 means an earlier attempt may have taken effect
  };

  // Signs and sends call, retrying transient failures. Returns the last HTTP response,
  // whatever its status, or EIO when no attempt got one. what ("read object K") is for
  // messages.
  Result<Reply> Send(const Call& call, const std::string& what);
  HttpRequest Sign(const Call& call, const std::string& url, const std::string& payload_hash) const;
  // The Status for a response that is not the expected success.
  Status Failure(const HttpResponse& resp, const std::string& what, const std::string& key, int tries) const;
  Status ObjectKeyCheck(const std::string& key) const;
  Status UploadCheck(const std::string& key, const std::string& upload_id) const;
  Result<std::map<int, std::string>> ListParts(const std::string& key, const std::string& upload_id);
  std::string Fail(const std::string& what) const { return "cannot " + what + " in " + Describe(); }

  const S3Location loc_;
  const SigV4Credentials creds_;
  HttpClient http_;
  std::mutex mu_;
  std::map<std::string, std::map<int, std::string>> etags_;  // upload id -> part -> ETag; guarded by mu_
};

HttpRequest S3Store::Sign(const Call& call, const std::string& url, const std::string& payload_hash) const {
  HttpRequest req;
  req.method = call.method;
  req.url = url;
  req.body = call.body;
  req.headers = call.headers;
  req.headers.emplace_back("Host", loc_.HostHeader());
  if (creds_.access_key.empty()) return req;  // anonymous
  std::string amz_date = AmzDate(time(nullptr));
  req.headers.emplace_back("x-amz-date", amz_date);
  req.headers.emplace_back("x-amz-content-sha256", payload_hash);
  if (!creds_.session_token.empty()) req.headers.emplace_back("x-amz-security-token", creds_.session_token);
  SigV4Request sreq;
  sreq.method = call.method;
  std::string_view path(url);
  path.remove_prefix(loc_.Endpoint().size());
  sreq.canonical_uri = std::string(path.substr(0, path.find('?')));
  sreq.query = call.query;
  sreq.headers = req.headers;  // every header we send is signed
  sreq.payload_hash = payload_hash;
  req.headers.emplace_back("Authorization", Authorization(sreq, creds_, loc_.region, amz_date));
  return req;
}

Result<S3Store::Reply> S3Store::Send(const Call& call, const std::string& what) {
  std::string path = "/";
  if (!loc_.virtual_hosted) path += loc_.bucket + (call.key.empty() ? "" : "/");
  path += UriEncode(call.key, /*keep_slash=*/true);
  std::string url = loc_.Endpoint() + path;
  std::string query = CanonicalQueryString(call.query);
  if (!query.empty()) url += "?" + query;
  // Hashing the body lets the server verify it arrived intact, even over plain HTTP.
  std::string payload_hash = Sha256Hex(call.body);
  RetriedCall rc;
  rc.log_tag = "s3";
  rc.what = what;
  rc.endpoint = loc_.Endpoint();
  rc.failure = Fail(what);
  rc.make = [&] { return Sign(call, url, payload_hash); };
  rc.retryable = [&](const HttpResponse& resp, std::string* reason) {
    S3Error err;
    bool has_error = (resp.status >= 300 || call.error_in_200) && ParseS3Error(resp.body, &err);
    bool retry = resp.status >= 500 || resp.status == 429 || (has_error && RetryableCode(err.code));
    if (retry) *reason = "HTTP " + std::to_string(resp.status) + (has_error ? " " + err.code : "");
    return retry;
  };
  RetryPolicy policy{loc_.tries, loc_.connect_timeout_s, loc_.io_timeout_s, loc_.deadline_s};
  ASSIGN_OR_RETURN(RetriedResponse r, PerformWithRetries(http_, policy, rc));
  return Reply{std::move(r.response), r.tries};
}

Status S3Store::Failure(const HttpResponse& resp, const std::string& what, const std::string& key, int tries) const {
  S3Error err;
  bool has_error = ParseS3Error(resp.body, &err);
  const std::string& code = err.code;
  std::string said = "(S3 said: " + (has_error && !code.empty() ? code : "HTTP " + std::to_string(resp.status)) + ")";
  if (code == "RequestTimeTooSkewed") {
    return Status::Err(EIO, Fail(what) + ": the clocks of this host and of " + loc_.Endpoint() +
                                " differ by more than 15 minutes; fix the clock " + said);
  }
  std::string region = resp.Header("x-amz-bucket-region");
  if (!region.empty() && region != loc_.region &&
      (resp.status == 301 || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" ||
       code == "IllegalLocationConstraintException")) {
    return Status::Err(EINVAL, Fail(what) + ": bucket " + loc_.bucket + " is in region " + region +
                                   "; add ?region=" + region + " to the bucket URL " + said);
  }
  if (resp.status == 403 || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "AccessDenied") {
    if (creds_.access_key.empty()) {
      return Status::Err(EACCES, Fail(what) + ": access denied by " + loc_.Endpoint() +
                                     ": no access key was given; give the access key and secret key " + said);
    }
    std::string hint = code == "AccessDenied" ? "check the access key and secret key, and that the user may use bucket " +
                                                    loc_.bucket
                                              : "check the access key and secret key";
    return Status::Err(EACCES, Fail(what) + ": access denied by " + loc_.Endpoint() + ": " + hint + " " + said);
  }
  if (code == "NoSuchBucket") {
    return Status::Err(ENOENT, Fail(what) + ": bucket " + loc_.bucket + " does not exist at " + loc_.Endpoint() +
                                   " (tierfs format creates it; check the bucket URL)");
  }
  if (code == "NoSuchUpload") {
    return Status::Err(ENOENT, Fail(what) + ": the multipart upload does not exist (already completed or aborted?)");
  }
  if (resp.status == 404) return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
  if (code == "EntityTooSmall") {
    return Status::Err(EINVAL, Fail(what) + ": every part but the last must be at least 5 MiB " + said);
  }
  if (code == "InvalidPart" || code == "InvalidPartOrder" || code == "InvalidArgument" || code == "KeyTooLongError") {
    return Status::Err(EINVAL, Fail(what) + ": " + (err.message.empty() ? "invalid request" : err.message) + " " +
                                   said);
  }
  std::string detail = has_error ? "S3 error " + (code.empty() ? "?" : code) + " (HTTP " +
                                       std::to_string(resp.status) + ")" + (err.message.empty() ? "" : ": " + err.message)
                                 : "unexpected HTTP " + std::to_string(resp.status) + " from " + loc_.Endpoint();
  if (tries > 1) detail += " (gave up after " + std::to_string(tries) + " tries)";
  return Status::Err(EIO, Fail(what) + ": " + detail);
}

Status S3Store::ObjectKeyCheck(const std::string& key) const {
  // S3 limits keys to 1024 bytes; an empty key would address the bucket itself.
  if (key.empty() || key.size() > 1024) {
    return Status::Err(EINVAL, "invalid object key '" + key + "' for " + Describe() +
                                   ": keys must be 1 to 1024 bytes long");
  }
  return Status::OK();
}

Status S3Store::UploadCheck(const std::string& key, const std::string& upload_id) const {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  if (upload_id.empty()) {
    return Status::Err(EINVAL, "empty multipart upload id for object " + key + " in " + Describe());
  }
  return Status::OK();
}

Status S3Store::Init() {
  // A one-key listing rather than HEAD: its errors come with an S3 error code.
  Call probe_list{"GET", "", {{"list-type", "2"}, {"max-keys", "1"}}, {}, {}, false};
  ASSIGN_OR_RETURN(Reply r, Send(probe_list, "open bucket " + loc_.bucket));
  if (r.response.status != 200) {
    S3Error err;
    if (!ParseS3Error(r.response.body, &err) || err.code != "NoSuchBucket") {
      return Failure(r.response, "open bucket " + loc_.bucket, "", r.tries);
    }
    std::string config;
    Call create{"PUT", "", {}, {}, {}, false};
    if (loc_.region != kDefaultRegion) {
      config = CreateBucketXml(loc_.region);
      create.body = {config};
      create.headers.emplace_back("Content-Type", "application/xml");
    }
    ASSIGN_OR_RETURN(Reply c, Send(create, "create bucket " + loc_.bucket));
    if (c.response.status != 200) {
      S3Error cerr;
      ParseS3Error(c.response.body, &cerr);
      if (cerr.code == "BucketAlreadyExists") {
        return Status::Err(EEXIST, "cannot create bucket " + loc_.bucket + " at " + loc_.Endpoint() +
                                       ": the name is taken by another account; choose another bucket name");
      }
      // Lost a race with another client creating it: fine.
      if (cerr.code != "BucketAlreadyOwnedByYou") {
        return Failure(c.response, "create bucket " + loc_.bucket, "", c.tries);
      }
    }
  }
  // Writing is the only reliable test that the credentials may write here.
  std::string probe = ".tierfs-probe." + RandomHex();
  RETURN_IF_ERROR(Put(probe, "probe"));
  return Delete(probe);
}

Status S3Store::PutParts(const std::string& key, const std::vector<std::string_view>& parts) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "write object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"PUT", key, {}, {}, parts, false}, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  return Status::OK();
}

Status S3Store::PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  if (meta.size() > kMaxObjectMeta) {
    return Status::Err(EINVAL, "metadata of object " + key + " is too long (" + std::to_string(meta.size()) + " bytes)");
  }
  std::string what = "write object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"PUT", key, {}, {{kMetaHeader, meta}}, {data}, false}, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  return Status::OK();
}

Result<std::string> S3Store::GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  if (meta) meta->clear();
  if (len == 0) {
    // Nothing to read, but a missing object must still be reported.
    RETURN_IF_ERROR(Head(key).status());
    return std::string();
  }
  std::string what = "read object " + key;
  Call call{"GET", key, {}, {}, {}, false};
  std::string range = ByteRange(off, len);
  if (!range.empty()) call.headers.emplace_back("Range", range);
  ASSIGN_OR_RETURN(Reply r, Send(call, what));
  HttpResponse& resp = r.response;
  if (meta && (resp.status == 200 || resp.status == 206)) *meta = resp.Header(kMetaHeader);
  if (auto body = RangedBody(resp, off, len)) return std::move(*body);
  return Failure(resp, what, key, r.tries);
}

Result<ObjectInfo> S3Store::Head(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "stat object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"HEAD", key, {}, {}, {}, false}, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  ObjectInfo info;
  info.key = key;
  std::string length = r.response.Header("content-length");
  char* end = nullptr;
  info.size = std::strtoull(length.c_str(), &end, 10);
  if (length.empty() || *end != '\0') {
    return Status::Err(EIO, Fail(what) + ": the reply has no valid Content-Length ('" + length + "')");
  }
  info.mtime_ns = ParseHttpDate(r.response.Header("last-modified"));
  return info;
}

Status S3Store::Delete(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "delete object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"DELETE", key, {}, {}, {}, false}, what));
  if (r.response.status == 204 || r.response.status == 200) return Status::OK();
  if (r.response.status == 404) {
    S3Error err;
    // A missing object is already deleted; a missing bucket is a configuration problem.
    if (!ParseS3Error(r.response.body, &err) || err.code != "NoSuchBucket") return Status::OK();
  }
  return Failure(r.response, what, key, r.tries);
}

Result<std::vector<ObjectInfo>> S3Store::List(const std::string& prefix, const std::string& start_after,
                                              size_t limit) {
  std::string what = "list objects with prefix '" + prefix + "'";
  std::vector<ObjectInfo> out;
  std::string token;
  while (limit == 0 || out.size() < limit) {
    size_t page = limit == 0 ? kListPage : std::min(kListPage, limit - out.size());
    ASSIGN_OR_RETURN(ListObjectsPage result, ListPage(prefix, token, start_after, page, false, what));
    for (ObjectInfo& info : result.objects) {
      // Servers are trusted to filter, but the contract is ours to keep.
      if (!info.key.starts_with(prefix) || info.key <= start_after) continue;
      if (limit != 0 && out.size() >= limit) break;
      out.push_back(std::move(info));
    }
    if (!result.truncated) break;
    token = result.next_token;
  }
  return out;
}

Result<ListObjectsPage> S3Store::ListPage(const std::string& prefix, const std::string& token,
                                          const std::string& start_after, size_t max, bool delimit,
                                          const std::string& what) {
  Call call{"GET", "", {{"list-type", "2"}, {"max-keys", std::to_string(max)}}, {}, {}, false};
  if (delimit) call.query.emplace_back("delimiter", "/");
  if (!prefix.empty()) call.query.emplace_back("prefix", prefix);
  if (!token.empty()) {
    call.query.emplace_back("continuation-token", token);
  } else if (!start_after.empty()) {
    call.query.emplace_back("start-after", start_after);
  }
  ASSIGN_OR_RETURN(Reply r, Send(call, what));
  if (r.response.status != 200) return Failure(r.response, what, "", r.tries);
  ListObjectsPage result;
  Status st = ParseListObjects(r.response.body, &result);
  if (!st.ok()) return Status::Err(EIO, Fail(what) + ": " + st.message());
  return result;
}

Result<LevelPage> S3Store::ListLevel(const std::string& prefix, const std::string& token) {
  ASSIGN_OR_RETURN(ListObjectsPage result,
                   ListPage(prefix, token, "", kListPage, true, "list one level of prefix '" + prefix + "'"));
  LevelPage page;
  KeepLevel(prefix, result.objects, result.prefixes, &page);
  if (result.truncated) page.next_token = result.next_token;
  return page;
}

Result<std::string> S3Store::CreateMultipart(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "start multipart upload of object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"POST", key, {{"uploads", ""}}, {}, {}, false}, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  Result<std::string> id = ParseUploadId(r.response.body);
  if (!id.ok()) return Status::Err(EIO, Fail(what) + ": " + id.status().message());
  std::lock_guard<std::mutex> lock(mu_);
  etags_[*id];
  return id;
}

Status S3Store::UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                           std::string_view data) {
  RETURN_IF_ERROR(UploadCheck(key, upload_id));
  if (part_num < 1 || part_num > kMaxPartNumber) {
    return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                   ": S3 parts are numbered 1 to 10000");
  }
  std::string what = "upload part " + std::to_string(part_num) + " of object " + key;
  Call call{"PUT", key, {{"partNumber", std::to_string(part_num)}, {"uploadId", upload_id}}, {}, {data}, false};
  ASSIGN_OR_RETURN(Reply r, Send(call, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  std::string etag = r.response.Header("etag");
  if (etag.empty()) return Status::Err(EIO, Fail(what) + ": the reply has no ETag");
  std::lock_guard<std::mutex> lock(mu_);
  etags_[upload_id][part_num] = std::move(etag);
  return Status::OK();
}

Result<std::map<int, std::string>> S3Store::ListParts(const std::string& key, const std::string& upload_id) {
  std::string what = "list the parts of multipart upload " + upload_id + " of object " + key;
  std::map<int, std::string> out;
  int marker = 0;
  while (true) {
    Call call{"GET", key, {{"uploadId", upload_id}}, {}, {}, false};
    if (marker > 0) call.query.emplace_back("part-number-marker", std::to_string(marker));
    ASSIGN_OR_RETURN(Reply r, Send(call, what));
    if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
    ListPartsPage page;
    Status st = ParseListParts(r.response.body, &page);
    if (!st.ok()) return Status::Err(EIO, Fail(what) + ": " + st.message());
    out.merge(page.etags);
    if (!page.truncated || page.next_marker <= marker) break;
    marker = page.next_marker;
  }
  return out;
}

Status S3Store::CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) {
  RETURN_IF_ERROR(UploadCheck(key, upload_id));
  std::string what = "complete multipart upload of object " + key;
  if (parts < 1 || parts > kMaxPartNumber) {
    return Status::Err(EINVAL, Fail(what) + ": invalid part count " + std::to_string(parts));
  }
  std::map<int, std::string> etags;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = etags_.find(upload_id);
    if (it != etags_.end()) etags = it->second;
  }
  // Parts beyond `parts` were uploaded but are not wanted; S3 drops them.
  etags.erase(etags.upper_bound(parts), etags.end());
  if (etags.size() < static_cast<size_t>(parts)) {
    // Uploaded through another instance (or before a restart): S3 knows the ETags.
    ASSIGN_OR_RETURN(auto listed, ListParts(key, upload_id));
    for (auto& [num, etag] : listed) {
      if (num <= parts) etags.emplace(num, std::move(etag));
    }
    for (int n = 1; n <= parts; ++n) {
      if (etags.count(n) == 0) {
        return Status::Err(EINVAL, Fail(what) + ": part " + std::to_string(n) + " of upload " + upload_id +
                                       " was never uploaded");
      }
    }
  }
  std::string body = CompleteMultipartXml(etags);
  Call call{"POST", key, {{"uploadId", upload_id}}, {{"Content-Type", "application/xml"}}, {body}, true};
  ASSIGN_OR_RETURN(Reply r, Send(call, what));
  S3Error err;
  bool has_error = ParseS3Error(r.response.body, &err);
  bool failed = r.response.status != 200 || has_error;
  if (failed && err.code == "NoSuchUpload" && r.tries > 1) {
    // An earlier try may have completed the upload and lost only its reply.
    if (Head(key).ok()) failed = false;
  }
  if (failed) {
    if (r.response.status == 200) {
      return Status::Err(EIO, Fail(what) + ": S3 error " + err.code + (err.message.empty() ? "" : ": " + err.message));
    }
    return Failure(r.response, what, key, r.tries);
  }
  std::lock_guard<std::mutex> lock(mu_);
  etags_.erase(upload_id);
  return Status::OK();
}

Status S3Store::AbortMultipart(const std::string& key, const std::string& upload_id) {
  RETURN_IF_ERROR(UploadCheck(key, upload_id));
  std::string what = "abort multipart upload of object " + key;
  ASSIGN_OR_RETURN(Reply r, Send(Call{"DELETE", key, {{"uploadId", upload_id}}, {}, {}, false}, what));
  S3Error err;
  bool gone = r.response.status == 404 && ParseS3Error(r.response.body, &err) && err.code == "NoSuchUpload";
  if (r.response.status != 204 && r.response.status != 200 && !gone) return Failure(r.response, what, key, r.tries);
  std::lock_guard<std::mutex> lock(mu_);
  etags_.erase(upload_id);
  return Status::OK();
}

}  // namespace

std::string S3Location::Endpoint() const { return scheme + "://" + HostHeader(); }

std::string S3Location::HostHeader() const { return port == 0 ? host : host + ":" + std::to_string(port); }

std::string S3Location::Describe() const {
  return "s3://" + HostHeader() + "/" + (virtual_hosted ? "" : bucket + "/");
}

Result<S3Location> ParseS3Location(const std::string& bucket_url) {
  if (bucket_url.find("://") == std::string::npos) return BadUrl(bucket_url, "no scheme");
  ASSIGN_OR_RETURN(Url url, ParseUrl(bucket_url));
  S3Location loc;
  loc.scheme = url.scheme;
  if (loc.scheme != "http" && loc.scheme != "https") return BadUrl(bucket_url, "the scheme must be http or https");
  if (!url.user.empty() || !url.password.empty()) {
    return BadUrl(url.Redacted(), "keys do not belong in the URL; give them as the access key and secret key");
  }
  if (url.host.empty()) return BadUrl(bucket_url, "no host");
  if (url.host.find('[') != std::string::npos) return BadUrl(bucket_url, "IPv6 addresses are not supported");
  loc.port = url.port;
  std::string path = url.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.empty()) {
    size_t dot = url.host.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == url.host.size() || IsIpv4(url.host)) {
      return BadUrl(bucket_url, "no bucket: give it as the path or as the first label of the host name");
    }
    loc.virtual_hosted = true;
    loc.bucket = url.host.substr(0, dot);
  } else {
    if (path.find('/') != std::string::npos) {
      return BadUrl(bucket_url, "the path must be just the bucket name (no prefix inside the bucket)");
    }
    loc.bucket = path;
  }
  loc.host = url.host;
  if (!ValidBucketName(loc.bucket)) {
    return BadUrl(bucket_url, "invalid bucket name '" + loc.bucket + "' (letters, digits, '.', '-' and '_')");
  }
  for (const auto& [name, value] : url.query) {
    if (name == "region") {
      if (value.empty()) return BadUrl(bucket_url, "empty region");
      loc.region = value;
    } else if (name == "tries" || name == "timeout") {
      char* end = nullptr;
      long v = std::strtol(value.c_str(), &end, 10);
      long max = name == "tries" ? kMaxTries : 3600;
      if (value.empty() || *end != '\0' || v < 1 || v > max) {
        return BadUrl(bucket_url, name + " must be a number from 1 to " + std::to_string(max));
      }
      if (name == "tries") {
        loc.tries = static_cast<int>(v);
      } else {
        loc.connect_timeout_s = v;
        loc.io_timeout_s = v;
      }
    } else {
      return BadUrl(bucket_url, "unknown option '" + name + "' (known: region, tries, timeout)");
    }
  }
  return loc;
}

Result<std::unique_ptr<ObjectStore>> NewS3Store(const StorageSpec& spec) {
  ASSIGN_OR_RETURN(S3Location loc, ParseS3Location(spec.bucket));
  if (spec.access_key.empty() != spec.secret_key.empty()) {
    return Status::Err(EINVAL, std::string("S3 storage ") + loc.Describe() + " needs both an access key and a secret key (" +
                                   (spec.access_key.empty() ? "the access key" : "the secret key") + " is missing)");
  }
  if (spec.io_timeout_s > 0) loc.deadline_s = spec.io_timeout_s;
  SigV4Credentials creds{spec.access_key, spec.secret_key, spec.session_token};
  return std::unique_ptr<ObjectStore>(std::make_unique<S3Store>(std::move(loc), std::move(creds)));
}

}  // namespace tierfs
