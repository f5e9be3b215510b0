#include "client/group_member.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "chunk/cached_store.h"
#include "common/url.h"
#include "group/cache_group.h"
#include "group/peer_server.h"
#include "meta/meta.h"

namespace tierfs::client {

GroupRuntime::~GroupRuntime() { Stop(); }

void GroupRuntime::Stop() {
  if (server_) server_->Stop();
  if (group_) group_->Stop();
}

std::string GroupRuntime::StatsJson() const {
  group::CacheGroupStats s = group_->stats();
  nlohmann::json j = {{"name", group_->options().name},   {"addr", group_->options().self_addr},
                      {"members", s.members},             {"asks", s.asks},
                      {"received", s.received},           {"unreachable", s.unreachable},
                      {"refused", s.refused},             {"damaged", s.damaged},
                      {"skipped_down", s.skipped_down},   {"hedged", s.hedged},
                      {"ask_pool_full", s.ask_pool_full}};
  nlohmann::json ring = nlohmann::json::array();
  for (const group::GroupMember& m : group_->members()) {
    if (!m.addr.empty()) ring.push_back(m.addr);
  }
  j["ring"] = ring;
  if (server_) {
    group::PeerServerStats p = server_->stats();
    j["served"] = p.served;
    j["refused_requests"] = p.refused;
    j["failed_requests"] = p.failed;
    // Flat: scripts read the last {...} of the cache server's log line.
    j["connections_open"] = p.connections.connections;
    j["connections_refused"] = p.connections.refused;
    j["connections_timed_out"] = p.connections.timed_out;
    j["bad_requests"] = p.connections.bad_requests;
    j["busy_replies"] = p.connections.busy;
  }
  return j.dump();
}

namespace {
// "HOST:PORT" -> (host, port); port 0 when absent.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return std::make_pair(s, 0);
  char* end = nullptr;
  long port = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (colon + 1 == s.size() || *end != '\0' || port < 0 || port > 65535) {
    return Status::Err(EINVAL, "--group-addr '" + s + "' is not HOST:PORT");
  }
  return std::make_pair(s.substr(0, colon), static_cast<int>(port));
}
}  // namespace

Result<std::unique_ptr<GroupRuntime>> JoinGroup(const GroupArgs& args, const std::string& meta_url, Meta* meta,
                                                CachedStore* store) {
  auto rt = std::unique_ptr<GroupRuntime>(new GroupRuntime());
  const FormatRecord& fmt = meta->format();
  ASSIGN_OR_RETURN(std::string secret, Meta::GroupSecret(meta->engine()));
  group::CacheGroupOptions o;
  o.name = args.name;
  o.volume_name = fmt.name;
  o.volume_uuid = fmt.uuid;
  o.secret = secret;
  DiskCache* disk = store->disk();
  o.capacity = disk ? disk->stats().capacity : store->cache()->capacity();
  o.used_bytes = [store] {
    StoreStats s = store->stats();
    return s.cache_bytes + s.disk.bytes;
  };
  if (!args.no_sharing) {
    std::string host;
    int port = 0;
    if (!args.addr.empty()) {
      ASSIGN_OR_RETURN(auto hp, SplitHostPort(args.addr));
      host = hp.first;
      port = hp.second;
    }
    std::string advertise = host;
    if (host.empty() || host == "0.0.0.0") {
      auto u = ParseUrl(meta_url);
      advertise = group::LocalAddressToward(u.ok() ? u->host : "");
    }
    group::PeerServerOptions so;
    so.host = host.empty() ? advertise : host;
    so.port = port;
    so.volume_name = fmt.name;
    so.volume_uuid = fmt.uuid;
    so.secret = secret;
    rt->server_ = std::make_unique<group::PeerServer>(
        so, [store](const std::string& key, uint32_t len, bool keep_on_disk) {
          return store->ServeBlock(key, len, keep_on_disk);
        });
    if (const char* f = getenv("TIERFS_FAULT_PEER_CORRUPT"); f && *f == '1') {
      spdlog::warn("TIERFS_FAULT_PEER_CORRUPT: this member damages every block it serves (tests only)");
      rt->server_->set_corrupt_replies(true);
    }
    RETURN_IF_ERROR(rt->server_->Start());
    o.self_addr = advertise + ":" + std::to_string(rt->server_->port());
  }
  rt->group_ = std::make_unique<group::CacheGroup>(meta, o);
  RETURN_IF_ERROR(rt->group_->Refresh());
  store->SetPeers(rt->group_.get());
  rt->group_->Start();
  spdlog::info("cache group {}: joined as {} ({} serving members)", o.name,
               o.self_addr.empty() ? std::string("a reader (--no-sharing)") : o.self_addr,
               rt->group_->stats().members);
  return rt;
}

}  // namespace tierfs::client
