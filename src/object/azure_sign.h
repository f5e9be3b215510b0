// Azure Storage Shared Key authentication (the Blob service's "SharedKey" scheme, version
// 2009-09-19 and later), plus the small encodings the Blob REST API needs.
//
// The signer is pure: it turns a request description, the account name and the decoded
// account key into the Authorization header value, so that it can be tested against fixed
// vectors. The string to sign is
//   VERB \n Content-Encoding \n Content-Language \n Content-Length ("" when 0) \n
//   Content-MD5 \n Content-Type \n Date \n If-Modified-Since \n If-Match \n
//   If-None-Match \n If-Unmodified-Since \n Range \n
//   CanonicalizedHeaders (every x-ms-* header: "name:value\n", lowercase, sorted) +
//   CanonicalizedResource ("/" ACCOUNT PATH, then "\nname:value" per query parameter,
//   lowercase names, sorted; values as given, not encoded; repeated names' values sorted
//   and joined with ',')
// and the signature is base64(HMAC-SHA256(key, string to sign)). The caller must send
// exactly what it signed: the path as given (URI-encoded), every header in headers, and a
// Content-Length equal to content_length.
//
// Threads: every function may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include "object/s3_sign.h"

namespace tierfs {

// The REST API version TierFS speaks (x-ms-version); Azurite 3.x and Azure accept it.
inline constexpr char kAzureApiVersion[] = "2021-08-06";

struct SharedKeyRequest {
  std::string method;       // "GET", "PUT", ...
  std::string path;         // the URI-encoded path as sent, starting with '/'
  HeaderList query;         // raw (not encoded) names and values
  HeaderList headers;       // every header sent but Content-Length, any case
  uint64_t content_length = 0;
};

std::string SharedKeyStringToSign(const std::string& account, const SharedKeyRequest& req);
// "SharedKey ACCOUNT:SIGNATURE". key is the raw account key (base64-decoded).
std::string SharedKeyAuthorization(const std::string& account, const std::string& key, const SharedKeyRequest& req);

// "Sun, 06 Nov 1994 08:49:37 GMT" for the UTC time t (x-ms-date).
std::string HttpDate(time_t t);

// The block id of part part_num of upload upload_id: base64 of "UPLOAD_ID-NNNNNN", the same
// length for every part of an upload, as Azure requires of a blob's blocks.
std::string AzureBlockId(const std::string& upload_id, int part_num);

}  // namespace tierfs
