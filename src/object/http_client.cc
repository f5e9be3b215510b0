#include "object/http_client.h"

#include <curl/curl.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/buffer_pool.h"
#include "common/segment_hasher.h"

namespace tierfs {
namespace {

// Larger buffers than curl's 16/64 KiB defaults cut per-call overhead on multi-MiB objects.
constexpr long kReceiveBuffer = 512 << 10;
constexpr long kUploadBuffer = 1 << 20;
// Content-Length values above this are not trusted for pre-allocation.
constexpr uint64_t kMaxReserve = 1ull << 30;

// Feeds the body pieces to curl in order; seeking lets curl rewind (for example when it
// must resend after an authentication negotiation).
struct BodyReader {
  const std::vector<std::string_view>* parts;
  size_t index = 0;
  size_t offset = 0;  // within parts[index]

  size_t Read(char* out, size_t max) {
    size_t n = 0;
    while (n < max && index < parts->size()) {
      std::string_view p = (*parts)[index];
      size_t take = std::min(max - n, p.size() - offset);
      std::memcpy(out + n, p.data() + offset, take);
      n += take;
      offset += take;
      if (offset == p.size()) {
        ++index;
        offset = 0;
      }
    }
    return n;
  }

  bool SeekTo(uint64_t pos) {
    index = 0;
    offset = 0;
    while (index < parts->size() && pos >= (*parts)[index].size()) {
      pos -= (*parts)[index].size();
      ++index;
    }
    if (index == parts->size()) return pos == 0;
    offset = static_cast<size_t>(pos);
    return true;
  }
};

struct Exchange {
  HttpResponse* response;
  bool reserve_body;
};

size_t ReadCallback(char* buf, size_t size, size_t nitems, void* userdata) {
  return static_cast<BodyReader*>(userdata)->Read(buf, size * nitems);
}

int SeekCallback(void* userdata, curl_off_t offset, int origin) {
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  return static_cast<BodyReader*>(userdata)->SeekTo(static_cast<uint64_t>(offset)) ? CURL_SEEKFUNC_OK
                                                                                    : CURL_SEEKFUNC_FAIL;
}

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* userdata) {
  auto* ex = static_cast<Exchange*>(userdata);
  ex->response->body.append(data, size * nmemb);
  // Segments hashed while in the CPU's cache, when the caller asked (SegmentHasher).
  SegmentHasher::Received(ex->response->body, size * nmemb);
  return size * nmemb;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

size_t HeaderCallback(char* data, size_t size, size_t nitems, void* userdata) {
  auto* ex = static_cast<Exchange*>(userdata);
  std::string_view line(data, size * nitems);
  if (line.starts_with("HTTP/")) {
    ex->response->headers.clear();  // a new response block (after 100 Continue, say)
    return line.size();
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return line.size();
  std::string name = Trim(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = Trim(line.substr(colon + 1));
  if (ex->reserve_body && name == "content-length") {
    uint64_t n = std::strtoull(value.c_str(), nullptr, 10);
    // Into a recycled buffer when the caller scoped a pool (ReceiveInto, common/buffer_pool.h).
    if (n > 0 && n <= kMaxReserve && ex->response->body.empty()) ex->response->body = ReceiveInto::Buffer(n);
  }
  ex->response->headers[std::move(name)] = std::move(value);
  return line.size();
}

Status TransportError(CURLcode rc, long os_errno, const char* errbuf) {
  std::string msg;
  if (rc == CURLE_COULDNT_CONNECT && os_errno != 0) {
    msg = std::strerror(static_cast<int>(os_errno));
  } else if (errbuf[0] != '\0') {
    msg = errbuf;
  } else {
    msg = curl_easy_strerror(rc);
  }
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return Status::Err(ETIMEDOUT, msg);
    case CURLE_COULDNT_CONNECT:
      return Status::Err(os_errno == ECONNREFUSED ? ECONNREFUSED : os_errno == ETIMEDOUT ? ETIMEDOUT : EIO, msg);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_NOT_BUILT_IN:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return Status::Err(EINVAL, msg);
    default:
      return Status::Err(EIO, msg);
  }
}

class SlistFree {
 public:
  explicit SlistFree(curl_slist* l) : l_(l) {}
  ~SlistFree() { curl_slist_free_all(l_); }
  SlistFree(const SlistFree&) = delete;
  SlistFree& operator=(const SlistFree&) = delete;

 private:
  curl_slist* l_;
};

}  // namespace

std::string HttpResponse::Header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? "" : it->second;
}

HttpClient::HttpClient(HttpClientOptions options) : options_(options) {
  // curl_global_init is not thread-safe in this libcurl; every client funnels through here.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::Release(void* handle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < options_.max_idle_handles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

Result<HttpResponse> HttpClient::Perform(const HttpRequest& req) {
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) return Status::Err(ENOMEM, "cannot create an HTTP handle");
  // Reset clears the previous request's options but keeps the handle's open connections.
  curl_easy_reset(h);

  HttpResponse response;
  Exchange exchange{&response, req.method != "HEAD"};
  BodyReader reader{&req.body};
  uint64_t body_size = 0;
  for (auto p : req.body) body_size += p.size();
  char errbuf[CURL_ERROR_SIZE];
  errbuf[0] = '\0';

  curl_slist* list = nullptr;
  bool has_content_type = false;
  for (const auto& [name, value] : req.headers) {
    if (strcasecmp(name.c_str(), "content-type") == 0) has_content_type = true;
    list = curl_slist_append(list, (name + ": " + value).c_str());
  }
  // No "Expect: 100-continue" round trip before bodies, and no form content type on POST.
  list = curl_slist_append(list, "Expect:");
  if (!has_content_type) list = curl_slist_append(list, "Content-Type:");
  SlistFree list_free(list);

  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   req.connect_timeout_ms > 0 ? req.connect_timeout_ms : options_.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, req.io_timeout_s > 0 ? req.io_timeout_s : options_.io_timeout_s);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req.total_timeout_ms > 0 ? req.total_timeout_ms : options_.total_timeout_ms);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!options_.tls.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.tls.ca_file.c_str());
  if (!options_.tls.cert_file.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, options_.tls.cert_file.c_str());
  if (!options_.tls.key_file.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, options_.tls.key_file.c_str());
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  // Object keys may contain "." and ".." segments; curl must not collapse them.
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, kReceiveBuffer);
  curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBuffer);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &exchange);

  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body_size));
  } else if (req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body_size));
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  if (req.method == "PUT" || req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_READFUNCTION, ReadCallback);
    curl_easy_setopt(h, CURLOPT_READDATA, &reader);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, SeekCallback);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &reader);
  }

  CURLcode rc = curl_easy_perform(h);
  long os_errno = 0;
  curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  // The handle must not keep pointers into this frame.
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  Release(h);
  if (rc != CURLE_OK) return TransportError(rc, os_errno, errbuf);
  return response;
}

int64_t ParseHttpDate(const std::string& text) {
  // Parsed by hand: strptime's %b depends on the process locale.
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char month[4] = {0};
  struct tm tm = {};
  if (std::sscanf(text.c_str(), "%*[A-Za-z], %d %3s %d %d:%d:%d", &tm.tm_mday, month, &tm.tm_year, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec) != 6) {
    return 0;
  }
  tm.tm_mon = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::strcmp(month, kMonths[i]) == 0) tm.tm_mon = i;
  }
  if (tm.tm_mon < 0) return 0;
  tm.tm_year -= 1900;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return 0;
  return static_cast<int64_t>(t) * 1000000000LL;
}

std::string ByteRange(uint64_t off, int64_t len) {
  if (off == 0 && len <= 0) return "";
  std::string range = "bytes=" + std::to_string(off) + "-";
  if (len > 0) range += std::to_string(off + static_cast<uint64_t>(len) - 1);
  return range;
}

std::optional<std::string> RangedBody(HttpResponse& resp, uint64_t off, int64_t len) {
  if (resp.status == 206) return std::move(resp.body);
  if (resp.status == 200) {
    if (off == 0 && len <= 0) return std::move(resp.body);
    if (off >= resp.body.size()) return std::string();
    return resp.body.substr(off, len < 0 ? std::string::npos : static_cast<size_t>(len));
  }
  if (resp.status == 416) return std::string();
  return std::nullopt;
}

}  // namespace tierfs
