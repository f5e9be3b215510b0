#include "group/peer_server.h"

#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "chunk/block_key.h"
#include "group/wire.h"

namespace tierfs::group {
namespace {

// cpp-httplib listens with a backlog of 5, fixed in Debian's compiled library. Members open
// their connections to an owner all at once (every download thread of every member at the
// start of a read); a full backlog drops connection attempts, which then outlive the 500 ms
// connect timeout, and a busy owner is taken for dead (skipped for 10 s, its blocks
// fetched from the store again: 66 to 150 extra GETs with 4 members on 2 cores). listen()
// on a listening socket changes its backlog; the library does not expose the socket, so it
// is found among this process's descriptors by its port.
void WidenBacklog(int port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (fd <= 2) continue;
    int listening = 0;
    socklen_t n = sizeof listening;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n) != 0 || !listening ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) {
      continue;
    }
    int p = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
            : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                         : -1;
    if (p == port && ::listen(fd, SOMAXCONN) != 0) spdlog::warn("cache group listener: listen: {}", strerror(errno));
  }
  closedir(d);
}

}  // namespace

PeerServer::PeerServer(PeerServerOptions options, Provider provider)
    : opts_(std::move(options)), provider_(std::move(provider)), server_(std::make_unique<httplib::Server>()) {}

PeerServer::~PeerServer() { Stop(); }

Status PeerServer::Start() {
  int threads = opts_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server_->set_keep_alive_max_count(1000);
  // Idle kept-alive connections hold a worker until this passes, and stop() waits for them.
  server_->set_keep_alive_timeout(2);
  server_->set_read_timeout(10, 0);
  server_->set_write_timeout(10, 0);
  server_->Get(kBlockPath, [this](const httplib::Request& req, httplib::Response& res) {
    auto refuse = [&](int status, const std::string& why) {
      refused_++;
      res.status = status;
      res.set_content(why + "\n", "text/plain");
    };
    std::string key = req.get_param_value("key");
    std::string len_s = req.get_param_value("len");
    std::string time_s = req.get_header_value(kTimeHeader);
    std::string volume = req.get_header_value(kVolumeHeader);
    std::string mac = req.get_header_value(kMacHeader);
    if (key.empty() || len_s.empty() || time_s.empty() || mac.empty()) return refuse(400, "missing key, len, time or MAC");
    char* end = nullptr;
    errno = 0;
    unsigned long len = std::strtoul(len_s.c_str(), &end, 10);
    long long t = std::strtoll(time_s.c_str(), nullptr, 10);
    if (errno != 0 || *end != '\0' || len == 0 || len > (64u << 20)) return refuse(400, "bad len");
    // The MAC first: nothing about the volume is told to a caller without the secret.
    if (!SameMac(RequestMac(opts_.secret, volume, key, static_cast<uint32_t>(len), t), mac)) {
      return refuse(403, "bad MAC");
    }
    int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    if (t < now - kMaxClockSkewS || t > now + kMaxClockSkewS) return refuse(403, "request time too far from ours");
    if (volume != opts_.volume_uuid) return refuse(403, "another volume");
    std::string kv;
    uint64_t id;
    uint32_t index, klen;
    std::string pack_key;
    uint32_t pack_off = 0;
    if (ParsePackedBlockKey(key, &pack_key, &pack_off)) {
      // A packed small file: its range of the pack must lie inside the pack.
      if (!ParsePackKey(pack_key, &kv, &id, &klen) || kv != opts_.volume_name) {
        return refuse(404, "not a pack of this volume");
      }
      if (static_cast<uint64_t>(pack_off) + static_cast<uint64_t>(len) > klen) {
        return refuse(400, "range passes the end of the pack");
      }
    } else {
      if (!ParseBlockKey(key, &kv, &id, &index, &klen) || kv != opts_.volume_name) {
        return refuse(404, "not a block of this volume");
      }
      if (klen != len) return refuse(400, "len does not match the key");
    }
    auto block = provider_(key, static_cast<uint32_t>(len));
    if (!block.ok()) {
      failed_++;
      res.status = block.status().code() == EINVAL ? 400 : 503;
      res.set_content(block.status().message() + "\n", "text/plain");
      return;
    }
    std::shared_ptr<const std::string> data = std::move(block).value();
    auto table = std::make_shared<std::string>(ChecksumTable(*data));
    res.set_header(kMacHeader, ReplyMac(opts_.secret, key, static_cast<uint32_t>(len), *table));
    if (corrupt_) {
      auto bad = std::make_shared<std::string>(*data);
      (*bad)[bad->size() / 2] ^= 0x5a;
      data = std::move(bad);
    }
    served_++;
    // The table, then the block straight from the cache's buffer.
    size_t total = table->size() + data->size();
    res.set_content_provider(total, "application/octet-stream",
                             [table, data](size_t off, size_t n, httplib::DataSink& sink) {
                               while (n > 0) {
                                 const std::string& part = off < table->size() ? *table : *data;
                                 size_t at = off < table->size() ? off : off - table->size();
                                 size_t take = std::min(n, part.size() - at);
                                 if (!sink.write(part.data() + at, take)) return false;
                                 off += take;
                                 n -= take;
                               }
                               return true;
                             });
  });
  // Not cpp-httplib's default SO_REUSEPORT: a second member on this host given the same
  // --group-addr would share the port, and the kernel would hand each peer connection to
  // either process; it must fail to start instead.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  if (opts_.port == 0) {
    port_ = server_->bind_to_any_port(opts_.host);
    if (port_ <= 0) return Status::Err(EADDRNOTAVAIL, "cannot listen on " + opts_.host + " for the cache group");
  } else {
    if (!server_->bind_to_port(opts_.host, opts_.port)) {
      return Status::Err(EADDRINUSE, "cannot listen on " + opts_.host + ":" + std::to_string(opts_.port) +
                                         " for the cache group (in use, or not an address of this host)");
    }
    port_ = opts_.port;
  }
  WidenBacklog(port_);
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) spdlog::debug("cache group listener stopped");
  });
  // httplib's stop() does nothing before the accept loop runs, so a Stop right after Start
  // would leave the loop running and the join waiting forever: return once it runs.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!server_->is_running()) return Status::Err(EIO, "the cache group listener did not start");
  return Status::OK();
}

void PeerServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

PeerServerStats PeerServer::stats() const {
  PeerServerStats s;
  s.served = served_;
  s.refused = refused_;
  s.failed = failed_;
  return s;
}

}  // namespace tierfs::group
