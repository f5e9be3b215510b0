// S3 object storage backend: libcurl for HTTP, AWS Signature V4 for authentication.
//
// The bucket URL is http(s)://HOST[:PORT]/BUCKET (path-style requests) or
// http(s)://BUCKET.HOST[:PORT] (virtual-hosted: no path, the bucket is the first label of
// the host), with optional query options:
//   region=R      signing region (default us-east-1)
//   tries=N       attempts per request, 1..20 (default 10: with backoff capped at 5 s,
//                 11 to 21 s of pauses, enough to ride out a gateway restart; never past
//                 the request's deadline, see below)
//   timeout=S     seconds allowed to connect, and for a transfer to stall (default 5 to
//                 connect, 30 for stalls), per attempt
// Credentials come from the StorageSpec (the caller resolves environment variables); with
// no access key requests are sent unsigned (public buckets). Object keys are used as
// object names verbatim.
//
// Requests that fail on the network (refused, reset, timed out), with HTTP 5xx, 429 or the
// S3 error RequestTimeout are retried with exponential backoff and jitter, at most `tries`
// times and never past the request's deadline: StorageSpec::io_timeout_s after it began,
// or the calling request's own (common/io_budget.h), whichever comes first. An attempt's
// connect and stall limits shrink to the time left, so a hung server costs the deadline,
// not tries x timeout. Other 4xx answers are final. This is the only retry loop on a
// store request (CachedStore and write-back do not multiply it). Errors name the operation, the object and the
// endpoint, never a secret: EACCES for rejected credentials or permissions, ENOENT for a
// missing object, bucket or upload, EINVAL for misconfiguration S3 can diagnose (wrong
// region, parts too small), EIO for everything else including an unreachable endpoint.
//
// Multipart uploads remember the ETag of each part in memory; CompleteMultipart asks S3
// (ListParts) for any it does not know, so an upload may be completed by another instance.
//
// Threads: every method may be called from any thread concurrently; connections are
// pooled and reused across calls.
#pragma once

#include <memory>
#include <string>

#include "object/object_store.h"

namespace tierfs {

// A parsed bucket URL.
struct S3Location {
  std::string scheme;  // "http" or "https"
  std::string host;    // the host requests go to (BUCKET.HOST when virtual-hosted)
  int port = 0;        // 0 = the scheme's default
  std::string bucket;
  bool virtual_hosted = false;
  std::string region = "us-east-1";
  int tries = 10;
  long connect_timeout_s = 5;
  long io_timeout_s = 30;  // an attempt's stall limit
  long deadline_s = kDefaultIoTimeoutS;  // a request's, retries included (StorageSpec::io_timeout_s)

  // "http://HOST[:PORT]", what error messages name.
  std::string Endpoint() const;
  // The Host header value.
  std::string HostHeader() const;
  // "s3://HOST[:PORT]/BUCKET/" or "s3://BUCKET.HOST[:PORT]/".
  std::string Describe() const;
};

// Errors (EINVAL) say what form was expected.
Result<S3Location> ParseS3Location(const std::string& bucket_url);

// Parses spec.bucket and checks the credentials are complete; does no I/O (Init does).
Result<std::unique_ptr<ObjectStore>> NewS3Store(const StorageSpec& spec);

}  // namespace tierfs
