// AWS Signature Version 4 for S3 requests, plus the hashing and encoding it needs.
//
// The signer is pure: it turns a request description, credentials and a timestamp into the
// Authorization header value, so that it can be tested against fixed vectors. The caller
// must send exactly what it signed: the path as given in canonical_uri, the query string
// as CanonicalQueryString() returns it, and every header in headers.
//
// Threads: every function may be called from any thread concurrently.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tierfs {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Payload hash value for bodies that are not hashed (the request is still signed).
inline constexpr char kUnsignedPayload[] = "UNSIGNED-PAYLOAD";

struct SigV4Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // optional; the caller sends it as x-amz-security-token
};

struct SigV4Request {
  std::string method;         // "GET", "PUT", ...
  std::string canonical_uri;  // the URI-encoded path as sent, starting with '/'
  HeaderList query;           // raw (not encoded) names and values; "" for a bare name
  HeaderList headers;         // every header to sign, any case; must include host
  std::string payload_hash;   // lowercase hex SHA-256 of the body, or kUnsignedPayload
};

// Percent-encodes everything but the unreserved characters A-Z a-z 0-9 - _ . ~, with
// uppercase hex digits, as SigV4 requires; keep_slash leaves '/' alone (object paths).
std::string UriEncode(std::string_view s, bool keep_slash);

std::string HexEncode(std::string_view bytes);
// Lowercase hex SHA-256 of the concatenation of parts (without concatenating them).
std::string Sha256Hex(const std::vector<std::string_view>& parts);
// Raw 32-byte HMAC-SHA256.
std::string HmacSha256(std::string_view key, std::string_view data);

// "20130524T000000Z" for the UTC time t.
std::string AmzDate(time_t t);

// Names and values encoded, sorted by name then value, joined with '&'; also the query
// string to put in the URL.
std::string CanonicalQueryString(const HeaderList& query);
// "host;range;x-amz-date": lowercase names, sorted, ';'-separated.
std::string SignedHeaders(const HeaderList& headers);
std::string CanonicalRequest(const SigV4Request& req);
// scope is "YYYYMMDD/REGION/SERVICE/aws4_request".
std::string StringToSign(const std::string& canonical_request, const std::string& amz_date,
                         const std::string& scope);
// The raw signing key derived from the secret, the date (YYYYMMDD), region and service.
std::string SigningKey(const std::string& secret_key, const std::string& date, const std::string& region,
                       const std::string& service);
// The value of the Authorization header. amz_date must equal the x-amz-date header in
// req.headers.
std::string Authorization(const SigV4Request& req, const SigV4Credentials& creds, const std::string& region,
                          const std::string& amz_date, const std::string& service = "s3");

}  // namespace tierfs
