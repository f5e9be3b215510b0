#include "metrics/exporter.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace tierfs::metrics {

Result<std::unique_ptr<Exporter>> Exporter::Start(const std::string& addr, Registry* registry) {
  if (addr.empty() || addr == "0") return std::unique_ptr<Exporter>();
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::Err(EINVAL, "--metrics wants HOST:PORT (e.g. 127.0.0.1:9567), not '" + addr + "'");
  }
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(addr.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) return Status::Err(EINVAL, "bad port in --metrics " + addr);
  std::unique_ptr<Exporter> e(new Exporter);
  e->server_ = std::make_unique<httplib::Server>();
  // Not cpp-httplib's default SO_REUSEPORT: a second mount would share the port with the
  // first (the kernel splitting scrapes between them) instead of moving to the next one.
  e->server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  e->server_->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  e->server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("TierFS metrics: /metrics\n", "text/plain");
  });
  for (long p = port; p < std::min(65536L, port + 100); ++p) {
    if (e->server_->bind_to_port(host, static_cast<int>(p))) {
      e->address_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(p);
      httplib::Server* s = e->server_.get();
      e->thread_ = std::thread([s] { s->listen_after_bind(); });
      // Until the loop runs, stop() would find nothing to stop and the join in the
      // destructor would wait forever (a command that ends at once, like fsck of a small
      // volume, hit that).
      for (int i = 0; i < 5000 && !s->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return e;
    }
  }
  return Status::Err(EADDRINUSE, "cannot listen for metrics on " + host + " ports " + std::to_string(port) + " to " +
                                     std::to_string(std::min(65535L, port + 99)));
}

Exporter::~Exporter() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tierfs::metrics
