#include "object/azure_store.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "common/backoff.h"
#include "common/base64.h"
#include "common/clock.h"
#include "common/size.h"
#include "common/url.h"
#include "object/azure_sign.h"
#include "object/azure_xml.h"
#include "object/http_client.h"
#include "object/http_retry.h"
#include "object/list_level.h"

namespace tierfs {
namespace {

constexpr char kUrlForms[] =
    "https://ACCOUNT.blob.core.windows.net/CONTAINER or http(s)://HOST[:PORT]/ACCOUNT/CONTAINER";
// List Blobs answers at most 5000 names per request.
constexpr size_t kListPage = 5000;
// Listing positions remembered for callers that page with start_after.
constexpr size_t kMaxRememberedMarkers = 1024;
constexpr int kMaxTries = 20;
// A block blob has at most 50000 blocks.
constexpr int kMaxPartNumber = 50000;
constexpr uint64_t kMinPutLimit = 1 << 10;
constexpr uint64_t kMaxPutLimit = 4000ull << 20;
// The user-metadata header that carries ChecksumStore's table (ObjectStore::PutWithMeta).
constexpr char kMetaHeader[] = "x-ms-meta-tierfs";
constexpr char kSasPrefix[] = "sas:";

Status BadUrl(const std::string& url, const std::string& why) {
  return Status::Err(EINVAL, "bad Azure container URL '" + url + "': " + why + " (expected " + kUrlForms +
                                 ", optionally followed by ?tries=N&timeout=SECONDS&put_limit=SIZE)");
}

bool IsIpv4(const std::string& host) {
  return !host.empty() &&
         std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

// Azure's rule: 3 to 63 characters, lowercase letters, digits and single hyphens, starting
// and ending with a letter or digit.
bool ValidContainerName(const std::string& c) {
  if (c.size() < 3 || c.size() > 63 || c.front() == '-' || c.back() == '-') return false;
  if (c.find("--") != std::string::npos) return false;
  return std::all_of(c.begin(), c.end(),
                     [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'; });
}

// 3 to 24 lowercase letters and digits.
bool ValidAccountName(const std::string& a) {
  return a.size() >= 3 && a.size() <= 24 &&
         std::all_of(a.begin(), a.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); });
}

std::string RandomHex() {
  std::mt19937_64& rng = ThreadRng();  // seeded again after fork()
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

// The error code of an answer: the x-ms-error-code header (also sent with HEAD, which has no
// body), else the <Error> document's.
AzureError ErrorOf(const HttpResponse& resp) {
  AzureError err;
  ParseAzureError(resp.body, &err);
  std::string header = resp.Header("x-ms-error-code");
  if (!header.empty()) err.code = header;
  return err;
}

bool IsAuthCode(const std::string& code) {
  return code == "AuthenticationFailed" || code == "AuthorizationFailure" || code == "InvalidAuthenticationInfo" ||
         code.starts_with("Authorization");
}

class AzureStore : public ObjectStore {
 public:
  AzureStore(AzureLocation loc, std::string key, std::string sas)
      : loc_(std::move(loc)),
        key_(std::move(key)),
        sas_(std::move(sas)),
        http_(HttpClientOptions{.connect_timeout_ms = loc_.connect_timeout_s * 1000,
                                .io_timeout_s = loc_.io_timeout_s,
                                .total_timeout_ms = 0,  // large objects take what they take
                                .max_idle_handles = 64,
                                .tls = {}}) {}

  std::string Describe() const override { return loc_.Describe(); }
  Status Init() override;
  Status Put(const std::string& key, std::string_view data) override { return PutBlob(key, {data}, nullptr); }
  Status PutParts(const std::string& key, const std::vector<std::string_view>& parts) override {
    return PutBlob(key, parts, nullptr);
  }
  Result<std::string> Get(const std::string& key, uint64_t off, int64_t len) override {
    return GetWithMeta(key, off, len, nullptr);
  }
  bool HasObjectMeta() const override { return true; }
  Status PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) override;
  Result<std::string> GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) override;
  Result<ObjectInfo> Head(const std::string& key) override;
  Status Delete(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix, const std::string& start_after,
                                       size_t limit) override;
  Result<LevelPage> ListLevel(const std::string& prefix, const std::string& token) override;
  // One List Blobs request: up to max names from marker, rolled up at '/' with delimit.
  Result<BlobListPage> ListPage(const std::string& prefix, const std::string& marker, size_t max, bool delimit,
                                const std::string& what);
  Result<std::string> CreateMultipart(const std::string& key) override;
  Status UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                    std::string_view data) override;
  Status CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) override;
  Status AbortMultipart(const std::string& key, const std::string& upload_id) override;

 private:
  struct Call {
    std::string method;
    std::string key;  // "" addresses the container itself
    HeaderList query;
    HeaderList headers;  // besides x-ms-date, x-ms-version and Authorization, which Send adds
    std::vector<std::string_view> body;
  };

  // Signs and sends call, retrying transient failures. Returns the last HTTP response,
  // whatever its status, or EIO when no attempt got one. what ("read object K") is for
  // messages.
  Result<RetriedResponse> Send(const Call& call, const std::string& what);
  // The Status for a response that is not the expected success.
  Status Failure(const HttpResponse& resp, const std::string& what, const std::string& key, int tries) const;
  Status ObjectKeyCheck(const std::string& key) const;
  Status UploadCheck(const std::string& key, const std::string& upload_id) const;
  // Put Blob, or Put Block + Put Block List past put_limit; meta may be null.
  Status PutBlob(const std::string& key, const std::vector<std::string_view>& parts, const std::string* meta);
  Status PutBlock(const std::string& key, const std::string& block_id, const std::vector<std::string_view>& body,
                  const std::string& what);
  Status PutBlockList(const std::string& key, const std::vector<std::string>& ids, const std::string* meta,
                      const std::string& what);
  std::string Fail(const std::string& what) const { return "cannot " + what + " in " + Describe(); }
  // Where a listing that returned last_key as its last key goes on from.
  struct Resume {
    std::string marker;  // the List Blobs marker ("": the start)
    bool exact = false;  // the marker is right after last_key (else before it: skip up to it)
  };
  void Remember(const std::string& prefix, const std::string& last_key, Resume resume);
  std::optional<Resume> Remembered(const std::string& prefix, const std::string& start_after);

  const AzureLocation loc_;
  const std::string key_;  // the decoded account key; empty with a SAS token
  const std::string sas_;  // the SAS token's query string; empty with a key
  HttpClient http_;
  std::mutex mu_;
  // (prefix, last key returned) -> where to go on; guarded by mu_.
  std::map<std::pair<std::string, std::string>, Resume> markers_;
  std::deque<std::pair<std::string, std::string>> marker_order_;  // oldest first; guarded by mu_
};

Result<RetriedResponse> AzureStore::Send(const Call& call, const std::string& what) {
  std::string path = loc_.ContainerPath();
  if (!call.key.empty()) path += "/" + UriEncode(call.key, /*keep_slash=*/true);
  std::string url = loc_.Endpoint() + path;
  std::string query = CanonicalQueryString(call.query);
  if (!sas_.empty()) query += (query.empty() ? "" : "&") + sas_;
  if (!query.empty()) url += "?" + query;
  uint64_t length = 0;
  for (auto p : call.body) length += p.size();

  RetriedCall rc;
  rc.log_tag = "azure";
  rc.what = what;
  rc.endpoint = loc_.Endpoint();
  rc.failure = Fail(what);
  rc.make = [&] {
    HttpRequest req;
    req.method = call.method;
    req.url = url;
    req.body = call.body;
    req.headers = call.headers;
    req.headers.emplace_back("x-ms-date", HttpDate(time(nullptr)));
    req.headers.emplace_back("x-ms-version", kAzureApiVersion);
    if (!key_.empty()) {
      SharedKeyRequest sreq{call.method, path, call.query, req.headers, length};
      req.headers.emplace_back("Authorization", SharedKeyAuthorization(loc_.account, key_, sreq));
    }
    return req;
  };
  rc.retryable = [](const HttpResponse& resp, std::string* reason) {
    bool retry = resp.status >= 500 || resp.status == 408 || resp.status == 429;
    if (retry) {
      std::string code = ErrorOf(resp).code;
      *reason = "HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " " + code);
    }
    return retry;
  };
  RetryPolicy policy{loc_.tries, loc_.connect_timeout_s, loc_.io_timeout_s, loc_.deadline_s};
  return PerformWithRetries(http_, policy, rc);
}

Status AzureStore::Failure(const HttpResponse& resp, const std::string& what, const std::string& key,
                           int tries) const {
  AzureError err = ErrorOf(resp);
  const std::string& code = err.code;
  std::string said = "(Azure said: " + (code.empty() ? "HTTP " + std::to_string(resp.status) : code) +
                     (err.message.empty() ? "" : ": " + err.message) + ")";
  if (resp.status == 403 || IsAuthCode(code)) {
    std::string hint;
    if (!sas_.empty()) {
      hint = code.find("Mismatch") != std::string::npos
                 ? "the SAS token does not allow this request; it needs the blob service, resource types "
                   "service, container and object, and permissions read, write, delete, list, add and create"
                 : "the SAS token was refused (expired, not yet valid, or not signed with a key of account " +
                       loc_.account + "); give a valid one as --secret-key sas:TOKEN";
    } else {
      hint = "the account key of account " + loc_.account +
             " was refused; check --secret-key (key1 or key2 of the storage account, base64) and that this "
             "host's clock is right";
    }
    return Status::Err(EACCES, Fail(what) + ": access denied by " + loc_.Endpoint() + ": " + hint + " " + said);
  }
  if (code == "ContainerNotFound") {
    return Status::Err(ENOENT, Fail(what) + ": container " + loc_.container + " does not exist at " +
                                   loc_.Endpoint() + " (tierfs format creates it; check the container URL)");
  }
  if (code == "ResourceNotFound" && key.empty()) {
    return Status::Err(ENOENT, Fail(what) + ": " + loc_.Endpoint() + " knows no account " + loc_.account +
                                   " or container " + loc_.container + "; check the container URL " + said);
  }
  if (resp.status == 404) return Status::Err(ENOENT, "object " + key + " not found in " + Describe());
  if (code == "InvalidBlockList") {
    return Status::Err(EINVAL, Fail(what) + ": a part was never uploaded (or the upload was already completed) " +
                                   said);
  }
  if (resp.status == 400 || code == "InvalidQueryParameterValue" || code == "InvalidHeaderValue" ||
      code == "InvalidUri" || code == "OutOfRangeInput" || code == "RequestBodyTooLarge") {
    return Status::Err(EINVAL, Fail(what) + ": the request was refused as invalid " + said);
  }
  std::string detail = "unexpected HTTP " + std::to_string(resp.status) + " from " + loc_.Endpoint() + " " + said;
  if (tries > 1) detail += " (gave up after " + std::to_string(tries) + " tries)";
  return Status::Err(EIO, Fail(what) + ": " + detail);
}

Status AzureStore::ObjectKeyCheck(const std::string& key) const {
  // Azure limits blob names to 1024 characters; an empty key would address the container.
  if (key.empty() || key.size() > 1024) {
    return Status::Err(EINVAL, "invalid object key '" + key + "' for " + Describe() +
                                   ": keys must be 1 to 1024 bytes long");
  }
  return Status::OK();
}

Status AzureStore::UploadCheck(const std::string& key, const std::string& upload_id) const {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  // Block ids of one blob must all have the same length: upload ids are ours, 16 hex digits.
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (upload_id.size() != 16 || !std::all_of(upload_id.begin(), upload_id.end(), hex)) {
    return Status::Err(EINVAL, "invalid multipart upload id '" + upload_id + "' for object " + key + " in " +
                                   Describe() + " (not one CreateMultipart returned)");
  }
  return Status::OK();
}

Status AzureStore::Init() {
  // A one-name listing: it tells a missing container apart from refused credentials.
  std::string what = "open container " + loc_.container;
  Call probe_list{"GET", "", {{"restype", "container"}, {"comp", "list"}, {"maxresults", "1"}}, {}, {}};
  ASSIGN_OR_RETURN(RetriedResponse r, Send(probe_list, what));
  if (r.response.status != 200) {
    if (ErrorOf(r.response).code != "ContainerNotFound") return Failure(r.response, what, "", r.tries);
    std::string create_what = "create container " + loc_.container;
    ASSIGN_OR_RETURN(RetriedResponse c, Send(Call{"PUT", "", {{"restype", "container"}}, {}, {}}, create_what));
    // 409 ContainerAlreadyExists: another client created it meanwhile.
    if (c.response.status != 201 && ErrorOf(c.response).code != "ContainerAlreadyExists") {
      return Failure(c.response, create_what, "", c.tries);
    }
  }
  // Writing is the only reliable test that the credentials may write here.
  std::string probe = ".tierfs-probe." + RandomHex();
  RETURN_IF_ERROR(Put(probe, "probe"));
  return Delete(probe);
}

Status AzureStore::PutBlock(const std::string& key, const std::string& block_id,
                            const std::vector<std::string_view>& body, const std::string& what) {
  Call call{"PUT", key, {{"comp", "block"}, {"blockid", block_id}}, {}, body};
  ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
  if (r.response.status != 201) return Failure(r.response, what, key, r.tries);
  return Status::OK();
}

Status AzureStore::PutBlockList(const std::string& key, const std::vector<std::string>& ids, const std::string* meta,
                                const std::string& what) {
  std::string body = BlockListXml(ids);
  Call call{"PUT", key, {{"comp", "blocklist"}}, {{"Content-Type", "application/xml"}}, {body}};
  if (meta != nullptr) call.headers.emplace_back(kMetaHeader, *meta);
  ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
  if (r.response.status == 201) return Status::OK();
  // An earlier try may have committed the list and lost only its reply: the blocks are
  // then committed, and the list names blocks no longer uncommitted.
  if (r.tries > 1 && ErrorOf(r.response).code == "InvalidBlockList" && Head(key).ok()) return Status::OK();
  return Failure(r.response, what, key, r.tries);
}

Status AzureStore::PutBlob(const std::string& key, const std::vector<std::string_view>& parts,
                           const std::string* meta) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "write object " + key;
  uint64_t total = 0;
  for (auto p : parts) total += p.size();
  if (total <= loc_.put_limit) {
    Call call{"PUT", key, {}, {{"x-ms-blob-type", "BlockBlob"}}, parts};
    if (meta != nullptr) call.headers.emplace_back(kMetaHeader, *meta);
    ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
    if (r.response.status != 201) return Failure(r.response, what, key, r.tries);
    return Status::OK();
  }
  // Too large for one request: blocks of put_limit bytes, cut across the pieces without
  // copying them, then one commit.
  const std::string upload = RandomHex();
  std::vector<std::string> ids;
  std::vector<std::string_view> block;
  uint64_t in_block = 0;
  auto flush = [&]() -> Status {
    ids.push_back(AzureBlockId(upload, static_cast<int>(ids.size()) + 1));
    RETURN_IF_ERROR(PutBlock(key, ids.back(), block, what + " (block " + std::to_string(ids.size()) + ")"));
    block.clear();
    in_block = 0;
    return Status::OK();
  };
  for (std::string_view p : parts) {
    while (!p.empty()) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(p.size(), loc_.put_limit - in_block));
      block.push_back(p.substr(0, take));
      in_block += take;
      p.remove_prefix(take);
      if (in_block == loc_.put_limit) RETURN_IF_ERROR(flush());
    }
  }
  if (in_block > 0) RETURN_IF_ERROR(flush());
  return PutBlockList(key, ids, meta, what);
}

Status AzureStore::PutWithMeta(const std::string& key, std::string_view data, const std::string& meta) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  if (meta.size() > kMaxObjectMeta) {
    return Status::Err(EINVAL, "metadata of object " + key + " is too long (" + std::to_string(meta.size()) +
                                   " bytes)");
  }
  return PutBlob(key, {data}, &meta);
}

Result<std::string> AzureStore::GetWithMeta(const std::string& key, uint64_t off, int64_t len, std::string* meta) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  if (meta) meta->clear();
  if (len == 0) {
    // Nothing to read, but a missing object must still be reported.
    RETURN_IF_ERROR(Head(key).status());
    return std::string();
  }
  std::string what = "read object " + key;
  Call call{"GET", key, {}, {}, {}};
  std::string range = ByteRange(off, len);
  if (!range.empty()) call.headers.emplace_back("x-ms-range", range);
  ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
  HttpResponse& resp = r.response;
  if (meta && (resp.status == 200 || resp.status == 206)) *meta = resp.Header(kMetaHeader);
  if (auto body = RangedBody(resp, off, len)) return std::move(*body);
  return Failure(resp, what, key, r.tries);
}

Result<ObjectInfo> AzureStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "stat object " + key;
  ASSIGN_OR_RETURN(RetriedResponse r, Send(Call{"HEAD", key, {}, {}, {}}, what));
  if (r.response.status != 200) return Failure(r.response, what, key, r.tries);
  ObjectInfo info;
  info.key = key;
  std::string length = r.response.Header("content-length");
  char* end = nullptr;
  info.size = std::strtoull(length.c_str(), &end, 10);
  if (length.empty() || *end != '\0') {
    return Status::Err(EIO, Fail(what) + ": the reply has no valid Content-Length ('" + length + "')");
  }
  info.mtime_ns = ParseHttpDate(r.response.Header("last-modified"));
  return info;
}

Status AzureStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  std::string what = "delete object " + key;
  Call call{"DELETE", key, {}, {{"x-ms-delete-snapshots", "include"}}, {}};
  ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
  if (r.response.status == 202 || r.response.status == 200) return Status::OK();
  // A missing blob is already deleted; a missing container is a configuration problem.
  if (r.response.status == 404 && ErrorOf(r.response).code != "ContainerNotFound") return Status::OK();
  return Failure(r.response, what, key, r.tries);
}

void AzureStore::Remember(const std::string& prefix, const std::string& last_key, Resume resume) {
  std::lock_guard<std::mutex> lock(mu_);
  auto id = std::make_pair(prefix, last_key);
  auto [it, inserted] = markers_.insert_or_assign(id, std::move(resume));
  if (!inserted) return;
  marker_order_.push_back(std::move(id));
  if (marker_order_.size() > kMaxRememberedMarkers) {
    markers_.erase(marker_order_.front());
    marker_order_.pop_front();
  }
}

std::optional<AzureStore::Resume> AzureStore::Remembered(const std::string& prefix,
                                                         const std::string& start_after) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = markers_.find({prefix, start_after});
  if (it == markers_.end()) return std::nullopt;
  return it->second;
}

Result<BlobListPage> AzureStore::ListPage(const std::string& prefix, const std::string& marker, size_t max,
                                          bool delimit, const std::string& what) {
  Call call{"GET", "", {{"restype", "container"}, {"comp", "list"}, {"maxresults", std::to_string(max)}}, {}, {}};
  if (delimit) call.query.emplace_back("delimiter", "/");
  if (!prefix.empty()) call.query.emplace_back("prefix", prefix);
  if (!marker.empty()) call.query.emplace_back("marker", marker);
  ASSIGN_OR_RETURN(RetriedResponse r, Send(call, what));
  if (r.response.status != 200) return Failure(r.response, what, "", r.tries);
  BlobListPage result;
  Status st = ParseBlobList(r.response.body, &result);
  if (!st.ok()) return Status::Err(EIO, Fail(what) + ": " + st.message());
  return result;
}

Result<LevelPage> AzureStore::ListLevel(const std::string& prefix, const std::string& token) {
  ASSIGN_OR_RETURN(BlobListPage result,
                   ListPage(prefix, token, kListPage, true, "list one level of prefix '" + prefix + "'"));
  LevelPage page;
  KeepLevel(prefix, result.objects, result.prefixes, &page);
  // Azure lists blobs and prefixes of a page in one name order; callers want each in order.
  std::sort(page.objects.begin(), page.objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  std::sort(page.prefixes.begin(), page.prefixes.end());
  page.next_token = result.next_marker;
  return page;
}

Result<std::vector<ObjectInfo>> AzureStore::List(const std::string& prefix, const std::string& start_after,
                                                 size_t limit) {
  std::string what = "list objects with prefix '" + prefix + "'";
  std::vector<ObjectInfo> out;
  // Azure's markers are opaque: a listing starts at the prefix, or where the listing that
  // returned start_after as its last key left off, and skips keys up to start_after.
  Resume from;
  if (!start_after.empty()) from = Remembered(prefix, start_after).value_or(Resume{});
  std::string marker = from.marker;
  bool skipping = !start_after.empty() && !from.exact;
  while (limit == 0 || out.size() < limit) {
    // Pages as long as the caller's, so that its next call starts where a page ended; full
    // ones while keys up to start_after are being skipped.
    size_t page = limit == 0 || (skipping && out.empty()) ? kListPage : std::min(kListPage, limit - out.size());
    ASSIGN_OR_RETURN(BlobListPage result, ListPage(prefix, marker, page, false, what));
    for (size_t i = 0; i < result.objects.size(); ++i) {
      ObjectInfo& info = result.objects[i];
      // Servers are trusted to filter, but the contract is ours to keep.
      if (!info.key.starts_with(prefix) || info.key <= start_after) continue;
      out.push_back(std::move(info));
      if (limit != 0 && out.size() == limit) {
        // Where the next page of a caller paging on from this key starts: after this
        // listing page when the key ended it and more follow, else this page again.
        bool at_page_end = i + 1 == result.objects.size() && !result.next_marker.empty();
        Remember(prefix, out.back().key, at_page_end ? Resume{result.next_marker, true} : Resume{marker, false});
        return out;
      }
    }
    if (result.next_marker.empty()) {
      // The end: a caller asking for what follows the last key reads this page again (the
      // listing may have grown since).
      if (!out.empty()) Remember(prefix, out.back().key, Resume{marker, false});
      break;
    }
    marker = result.next_marker;
  }
  return out;
}

Result<std::string> AzureStore::CreateMultipart(const std::string& key) {
  RETURN_IF_ERROR(ObjectKeyCheck(key));
  // Nothing to ask Azure: the id only names the blocks.
  return RandomHex();
}

Status AzureStore::UploadPart(const std::string& key, const std::string& upload_id, int part_num,
                              std::string_view data) {
  RETURN_IF_ERROR(UploadCheck(key, upload_id));
  if (part_num < 1 || part_num > kMaxPartNumber) {
    return Status::Err(EINVAL, "invalid part number " + std::to_string(part_num) + " for object " + key +
                                   ": Azure parts are numbered 1 to 50000");
  }
  return PutBlock(key, AzureBlockId(upload_id, part_num), {data},
                  "upload part " + std::to_string(part_num) + " of object " + key);
}

Status AzureStore::CompleteMultipart(const std::string& key, const std::string& upload_id, int parts) {
  RETURN_IF_ERROR(UploadCheck(key, upload_id));
  std::string what = "complete multipart upload of object " + key;
  if (parts < 1 || parts > kMaxPartNumber) {
    return Status::Err(EINVAL, Fail(what) + ": invalid part count " + std::to_string(parts));
  }
  std::vector<std::string> ids;
  ids.reserve(parts);
  for (int n = 1; n <= parts; ++n) ids.push_back(AzureBlockId(upload_id, n));
  return PutBlockList(key, ids, nullptr, what);
}

Status AzureStore::AbortMultipart(const std::string& key, const std::string& upload_id) {
  // Uncommitted blocks cannot be deleted without deleting the blob; Azure drops them after
  // a week, or at the blob's next commit.
  return UploadCheck(key, upload_id);
}

}  // namespace

std::string AzureLocation::Endpoint() const {
  return scheme + "://" + (port == 0 ? host : host + ":" + std::to_string(port));
}

std::string AzureLocation::ContainerPath() const {
  return path_style ? "/" + account + "/" + container : "/" + container;
}

std::string AzureLocation::Describe() const {
  return "azure://" + (port == 0 ? host : host + ":" + std::to_string(port)) + ContainerPath() + "/";
}

Result<AzureLocation> ParseAzureLocation(const std::string& container_url) {
  if (container_url.find("://") == std::string::npos) return BadUrl(container_url, "no scheme");
  ASSIGN_OR_RETURN(Url url, ParseUrl(container_url));
  AzureLocation loc;
  loc.scheme = url.scheme;
  if (loc.scheme != "http" && loc.scheme != "https") return BadUrl(container_url, "the scheme must be http or https");
  if (!url.user.empty() || !url.password.empty()) {
    return BadUrl(url.Redacted(), "keys do not belong in the URL; give the account key or SAS token as the secret key");
  }
  if (url.host.empty()) return BadUrl(container_url, "no host");
  if (url.host.find('[') != std::string::npos) return BadUrl(container_url, "IPv6 addresses are not supported");
  loc.host = url.host;
  loc.port = url.port;
  std::string path = url.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  size_t slash = path.find('/');
  if (path.empty()) return BadUrl(container_url, "no container");
  if (slash == std::string::npos) {
    size_t dot = url.host.find('.');
    if (dot == std::string::npos || dot == 0 || IsIpv4(url.host)) {
      return BadUrl(container_url, "no account: give it as the first label of the host name, or as the path's "
                                   "first segment before the container");
    }
    loc.account = url.host.substr(0, dot);
    loc.container = path;
  } else {
    if (path.find('/', slash + 1) != std::string::npos) {
      return BadUrl(container_url, "the path must be CONTAINER or ACCOUNT/CONTAINER (no prefix inside the container)");
    }
    loc.path_style = true;
    loc.account = path.substr(0, slash);
    loc.container = path.substr(slash + 1);
  }
  if (!ValidAccountName(loc.account)) {
    return BadUrl(container_url, "invalid account name '" + loc.account + "' (3 to 24 lowercase letters and digits)");
  }
  if (!ValidContainerName(loc.container)) {
    return BadUrl(container_url, "invalid container name '" + loc.container +
                                     "' (3 to 63 lowercase letters, digits and single hyphens, starting and "
                                     "ending with a letter or digit)");
  }
  for (const auto& [name, value] : url.query) {
    if (name == "tries" || name == "timeout") {
      char* end = nullptr;
      long v = std::strtol(value.c_str(), &end, 10);
      long max = name == "tries" ? kMaxTries : 3600;
      if (value.empty() || *end != '\0' || v < 1 || v > max) {
        return BadUrl(container_url, name + " must be a number from 1 to " + std::to_string(max));
      }
      if (name == "tries") {
        loc.tries = static_cast<int>(v);
      } else {
        loc.connect_timeout_s = v;
        loc.io_timeout_s = v;
      }
    } else if (name == "put_limit") {
      Result<uint64_t> v = ParseSize(value);
      if (!v.ok() || *v < kMinPutLimit || *v > kMaxPutLimit) {
        return BadUrl(container_url, "put_limit must be a size from 1K to 4000M");
      }
      loc.put_limit = *v;
    } else {
      return BadUrl(container_url, "unknown option '" + name + "' (known: tries, timeout, put_limit)");
    }
  }
  return loc;
}

Result<std::unique_ptr<ObjectStore>> NewAzureStore(const StorageSpec& spec) {
  ASSIGN_OR_RETURN(AzureLocation loc, ParseAzureLocation(spec.bucket));
  const std::string where = "Azure storage " + loc.Describe();
  if (!spec.access_key.empty() && spec.access_key != loc.account) {
    return Status::Err(EINVAL, where + ": the access key names account " + spec.access_key +
                                   " but the container URL names account " + loc.account +
                                   " (for Azure the access key is the account name; leave it out to use the URL's)");
  }
  if (!spec.session_token.empty()) {
    return Status::Err(EINVAL,
                       where + ": a session token is for S3; give an Azure SAS token as --secret-key sas:TOKEN");
  }
  if (spec.secret_key.empty()) {
    return Status::Err(EINVAL, where + " needs the account key (--secret-key KEY) or a SAS token "
                                       "(--secret-key sas:TOKEN)");
  }
  if (spec.io_timeout_s > 0) loc.deadline_s = spec.io_timeout_s;
  std::string key, sas;
  if (spec.secret_key.starts_with(kSasPrefix)) {
    sas = spec.secret_key.substr(sizeof(kSasPrefix) - 1);
    if (!sas.empty() && sas.front() == '?') sas.erase(0, 1);
    if (sas.find("sig=") == std::string::npos) {
      return Status::Err(EINVAL, where + ": the SAS token has no sig= field (give the whole token, "
                                         "sv=...&sig=..., after sas:)");
    }
  } else {
    std::optional<std::string> decoded = Base64Decode(spec.secret_key);
    if (!decoded || decoded->empty()) {
      return Status::Err(EINVAL, where + ": the account key is not base64 (give key1 or key2 of the storage "
                                         "account as the portal shows it, or a SAS token as sas:TOKEN)");
    }
    key = std::move(*decoded);
  }
  return std::unique_ptr<ObjectStore>(std::make_unique<AzureStore>(std::move(loc), std::move(key), std::move(sas)));
}

}  // namespace tierfs
