// Azure Blob Storage backend: block blobs over the Blob REST API (x-ms-version
// kAzureApiVersion), libcurl for HTTP, Shared Key or a SAS token for authentication.
//
// The bucket URL names a container:
//   https://ACCOUNT.blob.core.windows.net/CONTAINER      (the account is the host's first label)
//   http(s)://HOST[:PORT]/ACCOUNT/CONTAINER               (path-style: Azurite, the emulator)
// with optional query options tries=N and timeout=S as for S3 (s3_store.h), and
// put_limit=BYTES: objects up to it are one Put Blob, larger ones are sent as blocks of
// that size and committed with Put Block List (default 256 MiB; TierFS's blocks are at
// most 16 MiB).
//
// Credentials (StorageSpec): access_key is the account name (empty: the one in the URL;
// another one is refused), secret_key is either the account key, base64 as the portal and
// `az storage account keys list` show it (requests are signed with Shared Key, see
// azure_sign.h), or "sas:" followed by a SAS token (account or container SAS with read,
// write, delete, list, add and create permissions), which is appended to every request's
// query instead. One of the two is required.
//
// Objects are block blobs named by the key verbatim. Object metadata (HasObjectMeta) is the
// blob's x-ms-meta-tierfs, returned with every Get, ranged ones included. Multipart uploads
// are Put Block (block id: base64 of "UPLOAD_ID-NNNNNN") and Put Block List; uploads are
// random ids known only to the blocks, so any instance may complete one, and Abort has
// nothing to send: Azure drops uncommitted blocks after a week. Listing follows Azure's
// opaque NextMarker; a caller paging with start_after = the last key of the previous page
// continues from the marker remembered for that key, so paging costs one request per page.
//
// Requests that fail on the network, with HTTP 5xx (ServerBusy, InternalError,
// OperationTimedOut), 408 or 429 are retried with the policy of http_retry.h. Errors name
// the operation, the object and the endpoint, never a secret: EACCES when the key or SAS
// token is refused or lacks a permission, ENOENT for a missing object or container, EINVAL
// for a malformed URL or key, EIO for everything else including an unreachable endpoint.
// Init creates a missing container.
//
// Threads: every method may be called from any thread concurrently; connections are
// pooled and reused across calls.
#pragma once

#include <memory>
#include <string>

#include "object/object_store.h"

namespace tierfs {

// A parsed container URL.
struct AzureLocation {
  std::string scheme;  // "http" or "https"
  std::string host;
  int port = 0;        // 0 = the scheme's default
  std::string account;
  std::string container;
  bool path_style = false;  // the account is the path's first segment
  int tries = 10;
  long connect_timeout_s = 5;
  long io_timeout_s = 30;                // an attempt's stall limit
  long deadline_s = kDefaultIoTimeoutS;  // a request's, retries included
  uint64_t put_limit = 256ull << 20;

  // "http://HOST[:PORT]", what error messages name.
  std::string Endpoint() const;
  // The URL path of the container: "/CONTAINER" or "/ACCOUNT/CONTAINER".
  std::string ContainerPath() const;
  // "azure://HOST[:PORT]/[ACCOUNT/]CONTAINER/".
  std::string Describe() const;
};

// Errors (EINVAL) say what form was expected.
Result<AzureLocation> ParseAzureLocation(const std::string& container_url);

// Parses spec.bucket and checks the credentials; does no I/O (Init does).
Result<std::unique_ptr<ObjectStore>> NewAzureStore(const StorageSpec& spec);

}  // namespace tierfs
