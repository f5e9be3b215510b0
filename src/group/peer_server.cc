#include "group/peer_server.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "chunk/block_key.h"
#include "group/wire.h"

namespace tierfs::group {

PeerServer::PeerServer(PeerServerOptions options, Provider provider)
    : opts_(std::move(options)), provider_(std::move(provider)) {}

PeerServer::~PeerServer() { Stop(); }

void PeerServer::Handle(const ListenerRequest& req, ListenerReply* res) {
  auto refuse = [&](int status, const std::string& why) {
    refused_++;
    res->SetText(status, why);
  };
  if (req.method != "GET" || req.path != kBlockPath) return refuse(404, "not found");
  auto param = [&](const char* name) {
    auto it = req.params.find(name);
    return it == req.params.end() ? std::string() : it->second;
  };
  auto header = [&](const char* name) {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto it = req.headers.find(lower);
    return it == req.headers.end() ? std::string() : it->second;
  };
  std::string key = param("key");
  std::string len_s = param("len");
  std::string time_s = header(kTimeHeader);
  std::string volume = header(kVolumeHeader);
  std::string mac = header(kMacHeader);
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
  auto block = provider_(key, static_cast<uint32_t>(len), param("warm") == "1");
  if (!block.ok()) {
    failed_++;
    res->SetText(block.status().code() == EINVAL ? 400 : 503, block.status().message());
    return;
  }
  std::shared_ptr<const std::string> data = std::move(block).value();
  auto table = std::make_shared<const std::string>(ChecksumTable(*data));
  res->headers.emplace_back(kMacHeader, ReplyMac(opts_.secret, key, static_cast<uint32_t>(len), *table));
  if (corrupt_) {
    auto bad = std::make_shared<std::string>(*data);
    (*bad)[bad->size() / 2] ^= 0x5a;
    data = std::move(bad);
  }
  served_++;
  // The table, then the block straight from the cache's buffer.
  res->status = 200;
  res->content_type = "application/octet-stream";
  res->body = {table, data};
}

Status PeerServer::Start() {
  ListenerOptions lo = opts_.limits;
  lo.host = opts_.host;
  lo.port = opts_.port;
  lo.threads = opts_.threads;
  listener_ = std::make_unique<PeerListener>(lo, [this](const ListenerRequest& req, ListenerReply* res) {
    Handle(req, res);
  });
  Status st = listener_->Start();
  if (!st.ok()) return st.With("the cache group listener");
  port_ = listener_->port();
  return Status::OK();
}

void PeerServer::Stop() {
  if (listener_) listener_->Stop();
}

PeerServerStats PeerServer::stats() const {
  PeerServerStats s;
  s.served = served_;
  s.refused = refused_;
  s.failed = failed_;
  if (listener_) s.connections = listener_->stats();
  return s;
}

}  // namespace tierfs::group
