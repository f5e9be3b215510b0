// Who sent a request to the gateway: AWS Signature Version 4 checked the way S3 checks it,
// in the Authorization header or in a presigned URL's query string, with the signer of
// object/s3_sign.h (the client side of the same algorithm). The body's integrity is checked
// later, as it streams: a hashed payload against x-amz-content-sha256, a streaming
// (aws-chunked) payload chunk by chunk (aws_chunked.h).
//
// Errors are S3's: InvalidAccessKeyId (unknown key), SignatureDoesNotMatch,
// AuthorizationHeaderMalformed, AuthorizationQueryParametersError, RequestTimeTooSkewed
// (more than 15 minutes off), AccessDenied (an expired presigned URL, or no credentials
// where anonymous access is off).
//
// Threads: pure functions; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gateway/s3_error.h"
#include "object/s3_sign.h"

namespace tierfs::gateway {

struct AuthRequest {
  std::string method;
  std::string path;   // decoded, "/bucket/key" (path style) or "/key" (virtual host style)
  HeaderList query;   // decoded names and values, as received
  HeaderList headers; // lowercase names; repeated headers joined with ','
  int64_t now_s = 0;  // the gateway's clock (seconds since the epoch)

  // The value of a header or query parameter; "" when absent.
  std::string Header(std::string_view lower_name) const;
  std::string Param(std::string_view name) const;
  bool HasParam(std::string_view name) const;
};

enum class Payload {
  kHashed,                  // x-amz-content-sha256 is the body's SHA-256
  kUnsigned,                // UNSIGNED-PAYLOAD (and presigned URLs)
  kStreamingSigned,         // STREAMING-AWS4-HMAC-SHA256-PAYLOAD
  kStreamingSignedTrailer,  // STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
  kStreamingUnsignedTrailer,  // STREAMING-UNSIGNED-PAYLOAD-TRAILER
};

struct Identity {
  std::string access_key;  // "" for an anonymous request
  Payload payload = Payload::kUnsigned;
  std::string payload_sha256;  // kHashed: lowercase hex the body must hash to
  // What a streaming signed payload's chunks are signed with.
  std::string signing_key, amz_date, scope, seed_signature;
};

// The secret key of an access key; nullopt for an unknown one.
using SecretLookup = std::function<std::optional<std::string>(const std::string& access_key)>;

S3Result<Identity> Authenticate(const AuthRequest& req, const SecretLookup& secret, bool allow_anonymous);

// Byte-for-byte comparison in time independent of where they differ.
bool ConstantTimeEqual(std::string_view a, std::string_view b);

}  // namespace tierfs::gateway
