// The HTTP(S) side of the gateway: cpp-httplib's server with a fixed pool of connection
// threads, every method routed to S3Service, the access log and the request metrics.
//
// cpp-httplib applies Range headers to responses by itself; S3's rules differ (a suffix range
// past the start, 416 with an error document, no multi-range answers), so the pre-routing
// handler takes the parsed ranges away and S3Service answers ranges itself.
#include <fcntl.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "gateway/gateway.h"
#include "gateway/s3_service.h"
#include "gateway/xml_out.h"
#include "metrics/metrics.h"
#include "vfs/vfs.h"

namespace tierfs::gateway {
namespace {

metrics::Histogram* RequestHistogram(const std::string& op, int status) {
  std::string cls = std::to_string(status / 100) + "xx";
  return &metrics::Default().GetHistogram("tierfs_gateway_request_duration_seconds",
                                          "S3 gateway requests by API call and status class: latency",
                                          {{"op", op}, {"status", cls}});
}

metrics::Counter* ByteCounter(const std::string& op, const char* direction) {
  return &metrics::Default().GetCounter("tierfs_gateway_bytes_total",
                                        "S3 gateway: bytes of request bodies accepted (in) and of responses sent (out)",
                                        {{"op", op}, {"direction", direction}});
}

}  // namespace

struct Gateway::Impl {
  Vfs* vfs;
  GatewayOptions opts;
  std::unique_ptr<Users> users;
  std::unique_ptr<Objects> objects;
  std::unique_ptr<S3Service> service;
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  int port = 0;
  std::mutex log_mu;
  FILE* log = nullptr;
};

Gateway::Gateway(Vfs* vfs, GatewayOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->vfs = vfs;
  impl_->opts = std::move(opts);
}

Gateway::~Gateway() {
  Stop();
  if (impl_->log && impl_->log != stderr) fclose(impl_->log);
}

Status Gateway::Start() {
  Impl& m = *impl_;
  const GatewayOptions& o = m.opts;
  if (!o.access_log.empty()) {
    // One line per request: TIME REMOTE-ADDR ACCESS-KEY API-CALL METHOD /BUCKET/KEY STATUS
    // REQUEST-ID MILLISECONDS. It names keys and users: only its owner may read it.
    if (o.access_log == "-") {
      m.log = stderr;
    } else {
      int fd = open(o.access_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      m.log = fd >= 0 ? fdopen(fd, "a") : nullptr;
      if (fd >= 0 && !m.log) close(fd);
    }
    if (!m.log) return Status::Err(errno, "cannot open the access log " + o.access_log);
  }
  m.users = std::make_unique<Users>(m.vfs->meta()->engine(), o.user);
  Objects::Options oo;
  oo.root = o.root;
  oo.multi_buckets = o.multi_buckets;
  oo.volume_name = o.volume_name;
  m.objects = std::make_unique<Objects>(m.vfs, oo);
  auto init = m.objects->Init();
  if (!init.ok()) return Status::Err(EIO, "preparing the gateway's staging area: " + init.error().message);
  m.service = std::make_unique<S3Service>(m.objects.get(), m.users.get(), o);
  m.service->SetObserver([&m](const S3Req& r, int status, int64_t ns, uint64_t in, uint64_t out) {
    const std::string& op = r.op.empty() ? std::string("unknown") : r.op;
    RequestHistogram(op, status)->Observe(static_cast<double>(ns) / 1e9);
    if (in) ByteCounter(op, "in")->Add(in);
    if (out) ByteCounter(op, "out")->Add(out);
    if (!m.log) return;
    std::string line = Iso8601(NowNanos()) + " " + r.http.remote_addr + " " +
                       (r.user.access_key.empty() ? "-" : r.user.access_key) + " " + r.op + " " + r.method + " " +
                       r.resource + " " + std::to_string(status) + " " + r.request_id + " " +
                       std::to_string(static_cast<double>(ns) / 1e6) + "ms\n";
    std::lock_guard<std::mutex> l(m.log_mu);
    fputs(line.c_str(), m.log);
    fflush(m.log);
  });
  if (!o.cert_file.empty() || !o.key_file.empty()) {
    if (o.cert_file.empty() || o.key_file.empty()) return Status::Err(EINVAL, "HTTPS needs both --cert-file and --key-file");
    auto ssl = std::make_unique<httplib::SSLServer>(o.cert_file.c_str(), o.key_file.c_str());
    if (!ssl->is_valid()) {
      return Status::Err(EINVAL, "cannot use the certificate " + o.cert_file + " and key " + o.key_file +
                                     " (unreadable, or they do not match)");
    }
    m.http = std::move(ssl);
  } else {
    m.http = std::make_unique<httplib::Server>();
  }
  httplib::Server& s = *m.http;
  const int threads = std::max(4, o.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second gateway bind the same
  // port and silently take half its connections; only SO_REUSEADDR here.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(30);
  s.set_read_timeout(60, 0);
  s.set_write_timeout(60, 0);
  s.set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    // S3's range rules, not cpp-httplib's (see above). The request object is the server's
    // own, not a constant.
    const_cast<httplib::Request&>(req).ranges.clear();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  S3Service* svc = m.service.get();
  s.set_error_handler(httplib::Server::HandlerWithResponse([svc](const httplib::Request& req, httplib::Response& res) {
    if (res.has_header("x-amz-request-id")) return httplib::Server::HandlerResponse::Unhandled;  // S3Service's
    if (res.status == 416 && (req.method == "GET" || req.method == "HEAD")) {
      // cpp-httplib refused a Range header it could not parse before any handler ran; S3
      // ignores such a header and serves the whole object (RFC 9110 14.2).
      const_cast<httplib::Request&>(req).ranges.clear();
      res.status = -1;
      svc->Serve(req, res, nullptr);
      return httplib::Server::HandlerResponse::Handled;
    }
    // Other requests cpp-httplib refused itself (malformed, URI or headers too long): an S3
    // error document rather than an empty body.
    const bool too_large = res.status == 413 || res.status == 414 || res.status == 431;
    S3Error e = Err(res.status, too_large ? "MaxMessageLengthExceeded" : "BadRequest",
                    too_large ? "Your request was too big." : "The request could not be parsed.");
    res.set_content(ErrorXml(e, req.path, "-"), "application/xml");
    return httplib::Server::HandlerResponse::Handled;
  }));
  auto plain = [svc](const httplib::Request& req, httplib::Response& res) { svc->Serve(req, res, nullptr); };
  auto with_body = [svc](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
    svc->Serve(req, res, &body);
  };
  s.Get(".*", plain);  // HEAD too
  s.Delete(".*", plain);
  s.Put(".*", with_body);
  s.Post(".*", with_body);
  s.Options(".*", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  if (o.port == 0) {
    m.port = s.bind_to_any_port(o.host.c_str());
    if (m.port < 0) return Status::Err(EADDRINUSE, "cannot listen on " + o.host);
  } else {
    if (!s.bind_to_port(o.host.c_str(), o.port)) {
      return Status::Err(EADDRINUSE, "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                         " (in use, or not an address of this host)");
    }
    m.port = o.port;
  }
  m.thread = std::thread([&s] {
    pthread_setname_np(pthread_self(), "gw-accept");
    s.listen_after_bind();
  });
  while (!s.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::OK();
}

void Gateway::Stop() {
  Impl& m = *impl_;
  if (!m.http) return;
  // Stops accepting; listen_after_bind returns once the pool has finished the requests in
  // flight (cpp-httplib joins its workers).
  m.http->stop();
  if (m.thread.joinable()) m.thread.join();
  m.http.reset();
}

std::string Gateway::address() const { return impl_->opts.host + ":" + std::to_string(impl_->port); }

}  // namespace tierfs::gateway
