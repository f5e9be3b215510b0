#include "gateway/users.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/key_schema.h"
#include "meta/kv_engine.h"

namespace tierfs::gateway {
namespace {

constexpr std::string_view kPrefix = keys::kGatewayUserPrefix;
constexpr int64_t kReloadNs = 5'000'000'000;

std::string ToJson(const GatewayUser& u) {
  nlohmann::json j = {{"secret_key", u.secret_key}, {"uid", u.uid},          {"gid", u.gid},
                      {"read_only", u.read_only},   {"buckets", u.buckets}, {"display_name", u.display_name}};
  return j.dump();
}

std::optional<GatewayUser> FromJson(const std::string& ak, std::string_view v) {
  auto j = nlohmann::json::parse(v, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  GatewayUser u;
  u.access_key = ak;
  try {
    u.secret_key = j.value("secret_key", "");
    u.uid = j.value("uid", 0u);
    u.gid = j.value("gid", 0u);
    u.read_only = j.value("read_only", false);
    u.buckets = j.value("buckets", std::vector<std::string>{});
    u.display_name = j.value("display_name", ak);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return u;
}

}  // namespace

bool GatewayUser::MaySee(const std::string& bucket, uint32_t bucket_uid) const {
  if (all_buckets) return true;
  if (bucket_uid == uid) return true;
  return std::find(buckets.begin(), buckets.end(), bucket) != buckets.end();
}

Users::Users(KvEngine* engine, std::optional<GatewayUser> primary) : engine_(engine), primary_(std::move(primary)) {
  if (primary_) primary_->all_buckets = true;
}

void Users::Refresh() {
  auto list = List(engine_);
  if (!list.ok()) {
    spdlog::warn("gateway: reading the gateway users failed (keeping the ones known): {}", list.status().ToString());
    return;
  }
  users_ = std::move(*list);
}

std::optional<GatewayUser> Users::Find(const std::string& access_key) {
  if (primary_ && primary_->access_key == access_key) return primary_;
  std::lock_guard<std::mutex> l(mu_);
  const int64_t now = MonoNanos();
  auto find = [&]() -> std::optional<GatewayUser> {
    for (const auto& u : users_) {
      if (u.access_key == access_key) return u;
    }
    return std::nullopt;
  };
  if (now - loaded_ns_ > kReloadNs || loaded_ns_ == 0) {
    Refresh();
    loaded_ns_ = now;
  } else if (!find()) {
    // An unknown key: maybe added a moment ago (rate-limited by the reload interval / 10).
    if (now - loaded_ns_ > kReloadNs / 10) {
      Refresh();
      loaded_ns_ = now;
    }
  }
  return find();
}

Status Users::Add(KvEngine* engine, const GatewayUser& u) {
  if (u.access_key.size() < 3 || u.access_key.size() > 128 ||
      u.access_key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") !=
          std::string::npos) {
    return Status::Err(EINVAL, "an access key is 3 to 128 letters, digits, '-', '_' or '.'");
  }
  if (u.secret_key.size() < 8) return Status::Err(EINVAL, "a secret key has at least 8 characters");
  return engine->Txn([&](KvTxn& t) { return t.Put(std::string(kPrefix) + u.access_key, ToJson(u)); });
}

Status Users::Remove(KvEngine* engine, const std::string& access_key) {
  return engine->Txn([&](KvTxn& t) -> Status {
    ASSIGN_OR_RETURN(auto v, t.Get(std::string(kPrefix) + access_key));
    if (!v) return Status::Err(ENOENT, "no gateway user with access key " + access_key);
    return t.Delete(std::string(kPrefix) + access_key);
  });
}

Result<std::vector<GatewayUser>> Users::List(KvEngine* engine) {
  std::vector<GatewayUser> out;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) {
        out.clear();
        return t.Scan(kPrefix, PrefixEnd(kPrefix), 0, [&](std::string_view k, std::string_view v) {
          std::string ak(k.substr(2));
          if (auto u = FromJson(ak, v)) out.push_back(std::move(*u));
          return true;
        });
      },
      true));
  return out;
}

Result<std::string> ReadSecretKey(const std::string& file) {
  std::string secret;
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) return Status::Err(ENOENT, "--secret-key-file " + file + ": cannot read it");
    std::getline(f, secret);
  } else if (const char* env = getenv("TIERFS_GATEWAY_SECRET_KEY")) {
    secret = env;
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ')) secret.pop_back();
  return secret;
}

}  // namespace tierfs::gateway
