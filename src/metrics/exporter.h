// Serves a Registry over HTTP at /metrics (`mount --metrics ADDR:PORT`, `cache-server`).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "metrics/metrics.h"

namespace httplib {
class Server;
}

namespace tierfs::metrics {

class Exporter {
 public:
  // Listens on HOST:PORT, or on the next free port above it (up to 100 tries) when taken.
  // "" or "0" disables (returns null).
  static Result<std::unique_ptr<Exporter>> Start(const std::string& addr, Registry* registry);
  ~Exporter();
  // HOST:PORT actually listened on.
  const std::string& address() const { return address_; }

 private:
  Exporter() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
};

}  // namespace tierfs::metrics
