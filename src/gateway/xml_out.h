// The XML documents the gateway answers with, written by hand (escaping every text), and
// the two request documents it reads (CompleteMultipartUpload, Delete) parsed with tinyxml2.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/s3_error.h"

namespace tierfs::gateway {

std::string XmlEscape(std::string_view s);
void AppendXmlEscaped(std::string* out, std::string_view s);
// "2009-10-12T17:50:30.000Z"
std::string Iso8601(int64_t ns);
// "Wed, 12 Oct 2009 17:50:00 GMT" (Last-Modified, Date)
std::string HttpDate(int64_t ns);
// The time of an HTTP date (If-Modified-Since ...); -1 when unparsable.
int64_t ParseHttpDate(const std::string& s);

// A small writer: Open("ListBucketResult") ... Close(); Leaf("Key", key).
class Xml {
 public:
  explicit Xml(bool declaration = true);
  Xml& Open(std::string_view tag, std::string_view attrs = "");
  Xml& Close(std::string_view tag);
  Xml& Leaf(std::string_view tag, std::string_view text);
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

std::string ErrorXml(const S3Error& e, const std::string& resource, const std::string& request_id);

struct CompletePart {
  int number = 0;
  std::string etag;  // quotes removed
  std::vector<std::pair<std::string, std::string>> checksums;  // "CRC32" -> base64
};
S3Result<std::vector<CompletePart>> ParseCompleteMultipart(std::string_view body);

struct DeleteRequest {
  bool quiet = false;
  std::vector<std::string> keys;
};
S3Result<DeleteRequest> ParseDeleteObjects(std::string_view body);

}  // namespace tierfs::gateway
