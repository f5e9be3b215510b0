// The S3 API on Objects: each HTTP request is authenticated (sigv4_verify.h), mapped to a
// caller (users.h), dispatched by method, bucket, key and query to one operation, and
// answered with S3's headers, XML and error codes. Bodies stream: a PUT goes to the volume
// in 1 MiB writes as it arrives (aws-chunked decoded and verified on the way), a GET is read
// 1 MiB at a time as the client takes it.
//
// The operations live in s3_service.cc (authentication, dispatch, bodies, errors),
// service_objects.cc, service_buckets.cc (with listing) and service_multipart.cc.
//
// Threads: Serve is called by the HTTP server's pool, concurrently.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gateway/gateway.h"
#include "gateway/objects.h"
#include "gateway/sigv4_verify.h"
#include "gateway/users.h"

namespace tierfs::gateway {

class Multipart;

struct S3Req {
  S3Req(const httplib::Request& h, httplib::Response& r, const httplib::ContentReader* b) : http(h), res(r), body(b) {}
  const httplib::Request& http;
  httplib::Response& res;
  const httplib::ContentReader* body;  // null when the method has none
  std::string method;
  std::string bucket, key;  // decoded
  Ino bucket_ino = 0;       // resolved by Dispatch for object operations
  std::string resource;     // "/bucket/key", for errors and logs
  std::string request_id;
  AuthRequest auth;
  Identity id;
  GatewayUser user;
  Caller caller;
  bool body_read = false;
  std::string op;  // the API call's name, for logs and metrics ("GetObject", ...)

  std::string Header(std::string_view lower_name) const { return auth.Header(lower_name); }
  bool HasHeader(std::string_view lower_name) const;
  std::string Param(std::string_view name) const { return auth.Param(name); }
  bool HasParam(std::string_view name) const { return auth.HasParam(name); }
};

// What reading a body found: its size, MD5 and the checksums it carried (verified).
struct BodyResult {
  uint64_t size = 0;
  std::string md5_hex;
  std::map<std::string, std::string> checksums;  // "CRC32" -> base64
};

class S3Service {
 public:
  S3Service(Objects* objects, Users* users, const GatewayOptions& opts);
  ~S3Service();
  // One HTTP request. body: the reader for PUT and POST.
  void Serve(const httplib::Request& http, httplib::Response& res, const httplib::ContentReader* body);
  // Requests answered so far, by API call and status class (metrics).
  using Observer = std::function<void(const S3Req& r, int status, int64_t ns, uint64_t in, uint64_t out)>;
  void SetObserver(Observer o) { observer_ = std::move(o); }

 private:
  std::optional<S3Error> Authenticate(S3Req& r);
  std::optional<S3Error> Dispatch(S3Req& r);
  void Fail(S3Req& r, const S3Error& e);
  // Streams the body into sink (decoding aws-chunked), verifying the payload hash,
  // Content-MD5 and any x-amz-checksum-* (header or trailer).
  std::optional<S3Error> ReadBody(S3Req& r, const std::function<std::optional<S3Error>(std::string_view)>& sink,
                                  BodyResult* out);
  // A small body (an XML request), at most max bytes.
  S3Result<std::string> ReadSmallBody(S3Req& r, size_t max);
  // The object's headers (ETag, Last-Modified, type, user metadata ...) on the response.
  void ObjectHeaders(S3Req& r, const ObjectInfo& o);
  // The conditions of a GET/HEAD (If-Match, If-None-Match, If-(Un)Modified-Since):
  // 304 / 412 as S3 answers them, nullopt when they hold. prefix: "" or "x-amz-copy-source-".
  std::optional<S3Error> ReadConditions(S3Req& r, const ObjectInfo& o, const std::string& prefix);
  S3Result<WriteCondition> WriteConditions(S3Req& r);
  // The metadata of a new object from the request's headers.
  S3Result<ObjectMeta> MetaFromHeaders(S3Req& r);

  // service_objects.cc
  std::optional<S3Error> GetObject(S3Req& r, bool head);
  std::optional<S3Error> PutObject(S3Req& r);
  std::optional<S3Error> CopyObject(S3Req& r);
  std::optional<S3Error> DeleteObject(S3Req& r);
  std::optional<S3Error> DeleteObjects(S3Req& r, Ino bucket);
  S3Result<ObjectInfo> CopySource(S3Req& r);

  // service_buckets.cc
  std::optional<S3Error> ListBuckets(S3Req& r);
  std::optional<S3Error> BucketOp(S3Req& r);
  std::optional<S3Error> ListObjects(S3Req& r, Ino bucket, bool v2);

  // service_multipart.cc
  std::optional<S3Error> MultipartOp(S3Req& r, Ino bucket);

  Objects* objects_;
  Users* users_;
  GatewayOptions opts_;
  Observer observer_;
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<Multipart> multipart_;
  std::atomic<int64_t> last_upload_clean_ns_{0};
};

}  // namespace tierfs::gateway
