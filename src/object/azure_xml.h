// The XML of the Azure Blob REST API: parsing the responses AzureStore needs and building
// its request bodies. Parse errors are EIO "malformed Azure response: ..."; callers add
// which request.
//
// Threads: every function may be called from any thread concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "object/object_store.h"

namespace tierfs {

struct AzureError {
  std::string code;     // "BlobNotFound", "AuthenticationFailed", ...
  std::string message;  // may be empty
};

// The <Error> document in body; false when body is not one (empty, as for HEAD, or HTML).
bool ParseAzureError(std::string_view body, AzureError* out);

struct BlobListPage {
  std::vector<ObjectInfo> objects;  // in the order listed
  std::vector<std::string> prefixes;  // <BlobPrefix> names (listings with a delimiter)
  std::string next_marker;          // empty when the listing is complete
};
// An <EnumerationResults> of List Blobs.
Status ParseBlobList(std::string_view body, BlobListPage* out);

// <BlockList> committing the given block ids (base64), in order, as <Latest>.
std::string BlockListXml(const std::vector<std::string>& block_ids);

}  // namespace tierfs
