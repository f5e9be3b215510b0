#include "gateway/sigv4_verify.h"

#include <cctype>
#include <ctime>

namespace tierfs::gateway {
namespace {

constexpr int64_t kMaxSkewS = 15 * 60;
constexpr int64_t kMaxPresignS = 7 * 24 * 3600;

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

// "20130524T000000Z" -> seconds since the epoch; -1 when malformed.
int64_t ParseAmzDate(const std::string& s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return -1;
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && !std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
  }
  struct tm tm = {};
  tm.tm_year = std::stoi(s.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(s.substr(4, 2)) - 1;
  tm.tm_mday = std::stoi(s.substr(6, 2));
  tm.tm_hour = std::stoi(s.substr(9, 2));
  tm.tm_min = std::stoi(s.substr(11, 2));
  tm.tm_sec = std::stoi(s.substr(13, 2));
  return static_cast<int64_t>(timegm(&tm));
}

struct Credential {
  std::string access_key, date, region, service;
  std::string Scope() const { return date + "/" + region + "/" + service + "/aws4_request"; }
};

// "AK/20130524/us-east-1/s3/aws4_request"
std::optional<Credential> ParseCredential(const std::string& v) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = v.find('/', start);
    parts.push_back(v.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 5 || parts[4] != "aws4_request" || parts[1].size() != 8 || parts[0].empty()) return std::nullopt;
  return Credential{parts[0], parts[1], parts[2], parts[3]};
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t i = s.find(sep, start);
    out.push_back(s.substr(start, i == std::string::npos ? std::string::npos : i - start));
    if (i == std::string::npos) break;
    start = i + 1;
  }
  return out;
}

S3Error Malformed(const std::string& why) { return Err(400, "AuthorizationHeaderMalformed", why); }
S3Error QueryError(const std::string& why) { return Err(400, "AuthorizationQueryParametersError", why); }

// The signature the client should have computed.
std::string ExpectedSignature(const AuthRequest& req, const HeaderList& query, const std::vector<std::string>& signed_names,
                              const std::string& payload_hash, const std::string& amz_date, const Credential& cred,
                              const std::string& secret, std::string* signing_key, S3Error* err) {
  SigV4Request sr;
  sr.method = req.method;
  sr.canonical_uri = UriEncode(req.path, true);
  sr.query = query;
  for (const auto& name : signed_names) {
    bool found = false;
    for (const auto& [n, v] : req.headers) {
      if (n == name) {
        sr.headers.emplace_back(n, v);
        found = true;
      }
    }
    if (!found) {
      *err = Err(403, "SignatureDoesNotMatch", "the signed header '" + name + "' is not in the request");
      return "";
    }
  }
  sr.payload_hash = payload_hash;
  std::string to_sign = StringToSign(CanonicalRequest(sr), amz_date, cred.Scope());
  *signing_key = SigningKey(secret, cred.date, cred.region, cred.service);
  return HexEncode(HmacSha256(*signing_key, to_sign));
}

}  // namespace

std::string AuthRequest::Header(std::string_view lower_name) const {
  for (const auto& [n, v] : headers) {
    if (n == lower_name) return v;
  }
  return "";
}
std::string AuthRequest::Param(std::string_view name) const {
  for (const auto& [n, v] : query) {
    if (n == name) return v;
  }
  return "";
}
bool AuthRequest::HasParam(std::string_view name) const {
  for (const auto& [n, v] : query) {
    if (n == name) return true;
  }
  return false;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

S3Result<Identity> Authenticate(const AuthRequest& req, const SecretLookup& secret, bool allow_anonymous) {
  const std::string auth = req.Header("authorization");
  Identity id;
  if (auth.rfind("AWS4-HMAC-SHA256 ", 0) == 0) {
    // Credential=..., SignedHeaders=..., Signature=...
    std::string cred_s, signed_s, sig;
    for (const std::string& part : Split(auth.substr(17), ',')) {
      std::string p = Trim(part);
      size_t eq = p.find('=');
      if (eq == std::string::npos) return Malformed("the Authorization header is malformed: '" + p + "'");
      std::string k = p.substr(0, eq), v = p.substr(eq + 1);
      if (k == "Credential") cred_s = v;
      else if (k == "SignedHeaders") signed_s = v;
      else if (k == "Signature") sig = v;
    }
    if (cred_s.empty() || signed_s.empty() || sig.empty()) {
      return Malformed("the Authorization header needs Credential, SignedHeaders and Signature");
    }
    auto cred = ParseCredential(cred_s);
    if (!cred) return Malformed("the Credential '" + cred_s + "' is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"");
    std::string amz_date = req.Header("x-amz-date");
    if (amz_date.empty()) {
      return Err(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header");
    }
    int64_t t = ParseAmzDate(amz_date);
    if (t < 0) return Err(403, "AccessDenied", "x-amz-date '" + amz_date + "' is not in the ISO 8601 basic format");
    if (amz_date.substr(0, 8) != cred->date) {
      return Malformed("the credential's date " + cred->date + " does not match x-amz-date " + amz_date);
    }
    if (t > req.now_s + kMaxSkewS || t < req.now_s - kMaxSkewS) {
      return Err(403, "RequestTimeTooSkewed",
                 "The difference between the request time and the server's time is too large.");
    }
    std::string payload = req.Header("x-amz-content-sha256");
    if (payload.empty()) {
      return Err(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256");
    }
    if (payload == "UNSIGNED-PAYLOAD") {
      id.payload = Payload::kUnsigned;
    } else if (payload == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") {
      id.payload = Payload::kStreamingSigned;
    } else if (payload == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") {
      id.payload = Payload::kStreamingSignedTrailer;
    } else if (payload == "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
      id.payload = Payload::kStreamingUnsignedTrailer;
    } else if (payload.size() == 64 && payload.find_first_not_of("0123456789abcdef") == std::string::npos) {
      id.payload = Payload::kHashed;
      id.payload_sha256 = payload;
    } else {
      return Err(400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-... or a "
                                         "lowercase hex SHA-256, not '" + payload + "'");
    }
    std::vector<std::string> names = Split(signed_s, ';');
    bool host = false;
    for (const auto& n : names) host |= n == "host";
    if (!host) return Malformed("the signed headers must include host");
    auto key = secret(cred->access_key);
    if (!key) {
      return Err(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
    }
    S3Error err;
    std::string signing_key;
    std::string want = ExpectedSignature(req, req.query, names, payload, amz_date, *cred, *key, &signing_key, &err);
    if (want.empty()) return err;
    if (!ConstantTimeEqual(want, sig)) {
      return Err(403, "SignatureDoesNotMatch",
                 "The request signature we calculated does not match the signature you provided. Check your key "
                 "and signing method.");
    }
    id.access_key = cred->access_key;
    id.signing_key = signing_key;
    id.amz_date = amz_date;
    id.scope = cred->Scope();
    id.seed_signature = sig;
    return id;
  }
  if (req.HasParam("X-Amz-Algorithm") || req.HasParam("X-Amz-Signature")) {
    if (req.Param("X-Amz-Algorithm") != "AWS4-HMAC-SHA256") {
      return QueryError("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"");
    }
    std::string cred_s = req.Param("X-Amz-Credential"), amz_date = req.Param("X-Amz-Date");
    std::string expires_s = req.Param("X-Amz-Expires"), signed_s = req.Param("X-Amz-SignedHeaders");
    std::string sig = req.Param("X-Amz-Signature");
    if (cred_s.empty() || amz_date.empty() || expires_s.empty() || signed_s.empty() || sig.empty()) {
      return QueryError("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
                        "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.");
    }
    auto cred = ParseCredential(cred_s);
    if (!cred) return QueryError("the X-Amz-Credential '" + cred_s + "' is malformed");
    int64_t t = ParseAmzDate(amz_date);
    if (t < 0 || amz_date.substr(0, 8) != cred->date) return QueryError("X-Amz-Date '" + amz_date + "' is malformed");
    int64_t expires = -1;
    if (expires_s.find_first_not_of("0123456789") == std::string::npos && expires_s.size() <= 9) {
      expires = std::stoll(expires_s);
    }
    if (expires < 0) return QueryError("X-Amz-Expires should be a number");
    if (expires > kMaxPresignS) {
      return QueryError("X-Amz-Expires must be less than a week (in seconds) that is 604800");
    }
    if (req.now_s > t + expires) return AccessDenied("Request has expired");
    if (t > req.now_s + kMaxSkewS) return AccessDenied("Request is not valid yet");
    auto key = secret(cred->access_key);
    if (!key) {
      return Err(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
    }
    HeaderList query;
    for (const auto& [n, v] : req.query) {
      if (n != "X-Amz-Signature") query.emplace_back(n, v);
    }
    std::string payload = req.Header("x-amz-content-sha256");
    if (payload.empty()) payload = kUnsignedPayload;
    S3Error err;
    std::string signing_key;
    std::string want = ExpectedSignature(req, query, Split(signed_s, ';'), payload, amz_date, *cred, *key,
                                         &signing_key, &err);
    if (want.empty()) return err;
    if (!ConstantTimeEqual(want, sig)) {
      return Err(403, "SignatureDoesNotMatch",
                 "The request signature we calculated does not match the signature you provided. Check your key "
                 "and signing method.");
    }
    id.access_key = cred->access_key;
    id.payload = payload == kUnsignedPayload ? Payload::kUnsigned : Payload::kHashed;
    if (id.payload == Payload::kHashed) id.payload_sha256 = payload;
    return id;
  }
  if (auth.rfind("AWS ", 0) == 0) {
    return Err(400, "InvalidRequest",
               "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.");
  }
  if (!auth.empty()) return Malformed("unknown authorization scheme");
  if (!allow_anonymous) return AccessDenied("Anonymous access is not allowed (the gateway was started without --anonymous)");
  id.payload = Payload::kUnsigned;
  return id;
}

}  // namespace tierfs::gateway
