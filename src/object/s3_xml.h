// The XML of the S3 API: parsing the responses S3Store needs and building its request
// bodies. Parse errors are EIO "malformed S3 response: ..."; callers add which request.
//
// Threads: every function may be called from any thread concurrently.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "object/object_store.h"

namespace tierfs {

struct S3Error {
  std::string code;     // "NoSuchKey", "SignatureDoesNotMatch", ...
  std::string message;  // may be empty
};

// The <Error> document in body; false when body is not one (empty, HTML from a proxy...).
bool ParseS3Error(std::string_view body, S3Error* out);

struct ListObjectsPage {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> prefixes;  // <CommonPrefixes> (listings with a delimiter)
  bool truncated = false;
  std::string next_token;  // NextContinuationToken, set when truncated
};
// A ListObjectsV2 result.
Status ParseListObjects(std::string_view body, ListObjectsPage* out);

// The UploadId of an InitiateMultipartUploadResult.
Result<std::string> ParseUploadId(std::string_view body);

struct ListPartsPage {
  std::map<int, std::string> etags;  // part number -> ETag (with its quotes, as sent)
  bool truncated = false;
  int next_marker = 0;  // NextPartNumberMarker
};
Status ParseListParts(std::string_view body, ListPartsPage* out);

// <CompleteMultipartUpload> listing every part in order.
std::string CompleteMultipartXml(const std::map<int, std::string>& etags);
// <CreateBucketConfiguration> for a bucket in region (not needed for us-east-1).
std::string CreateBucketXml(const std::string& region);

// "2009-10-12T17:50:30.000Z" to nanoseconds since the epoch; 0 when unparsable.
int64_t ParseIso8601(std::string_view text);

}  // namespace tierfs
