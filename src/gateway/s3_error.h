// The errors the gateway answers with: an HTTP status and S3's error code, rendered as S3's
// <Error> XML document (s3_xml_out.h). Every refusal of a client's request is one of these,
// with the code S3 itself returns for it, never a 500 for a client's mistake.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace tierfs::gateway {

struct S3Error {
  int http = 500;
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch", ...
  std::string message;  // for people; S3's wording where it has one
};

inline S3Error Err(int http, std::string code, std::string message) {
  return S3Error{http, std::move(code), std::move(message)};
}

// The ones used in several places.
inline S3Error AccessDenied(std::string why = "Access Denied") { return Err(403, "AccessDenied", std::move(why)); }
inline S3Error InvalidArgument(std::string why) { return Err(400, "InvalidArgument", std::move(why)); }
inline S3Error PreconditionFailed() {
  return Err(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
}
inline S3Error InternalError(std::string why) { return Err(500, "InternalError", std::move(why)); }
inline S3Error NotImplemented(std::string what) {
  return Err(501, "NotImplemented", what + " is not implemented by the TierFS gateway");
}

// A value or an S3 error.
template <typename T>
class S3Result {
 public:
  S3Result(T v) : v_(std::move(v)) {}             // NOLINT(runtime/explicit)
  S3Result(S3Error e) : e_(std::move(e)) {}       // NOLINT(runtime/explicit)
  bool ok() const { return v_.has_value(); }
  const S3Error& error() const { return *e_; }
  T& operator*() { return *v_; }
  const T& operator*() const { return *v_; }
  T* operator->() { return &*v_; }
  const T* operator->() const { return &*v_; }

 private:
  std::optional<T> v_;
  std::optional<S3Error> e_;
};

}  // namespace tierfs::gateway
