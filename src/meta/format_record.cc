// The volume's format record (key "V", meta.h FormatRecord) to and from JSON, and the
// store settings it describes.
#include <nlohmann/json.hpp>

#include "meta/meta.h"

namespace tierfs {

std::string FormatRecord::ToJson() const {
  nlohmann::json j = {{"name", name},         {"uuid", uuid},       {"storage", storage},
                      {"bucket", bucket},     {"block_size", block_size}, {"version", version},
                      {"created_ns", created_ns}, {"session_timeout_s", session_timeout_s},
                      {"trash_days", trash_days}, {"changelog_hours", changelog_hours}};
  if (!access_key.empty()) j["access_key"] = access_key;
  if (!secret_key.empty()) j["secret_key"] = secret_key;
  if (!session_token.empty()) j["session_token"] = session_token;
  if (!ceph_conf.empty()) j["ceph_conf"] = ceph_conf;
  if (!group_secret.empty()) j["group_secret"] = group_secret;
  if (!mirror_of.empty()) j["mirror_of"] = mirror_of;
  if (!source_storage.empty()) {
    nlohmann::json src = {{"storage", source_storage}, {"bucket", source_bucket}};
    if (!source_access_key.empty()) src["access_key"] = source_access_key;
    if (!source_secret_key.empty()) src["secret_key"] = source_secret_key;
    if (!source_session_token.empty()) src["session_token"] = source_session_token;
    if (!source_ceph_conf.empty()) src["ceph_conf"] = source_ceph_conf;
    j["source"] = src;
  }
  return j.dump();
}

StorageSpec FormatRecord::Spec() const {
  StorageSpec s;
  s.storage = storage;
  s.bucket = bucket;
  s.access_key = access_key;
  s.secret_key = secret_key;
  s.session_token = session_token;
  s.ceph_conf = ceph_conf;
  s.checksums_in_meta = version >= 2;
  s.volume = name;
  return s;
}

StorageSpec FormatRecord::SourceSpec() const {
  StorageSpec s = Spec();
  s.storage = source_storage;
  s.bucket = source_bucket;
  s.access_key = source_access_key;
  s.secret_key = source_secret_key;
  s.session_token = source_session_token;
  s.ceph_conf = source_ceph_conf;
  return s;
}

FormatRecord FormatRecord::Redacted() const {
  FormatRecord r = *this;
  if (!r.source_secret_key.empty()) r.source_secret_key = "****";
  if (!r.source_session_token.empty()) r.source_session_token = "****";
  if (!r.secret_key.empty()) r.secret_key = "****";
  if (!r.session_token.empty()) r.session_token = "****";
  if (!r.group_secret.empty()) r.group_secret = "****";
  return r;
}

Result<FormatRecord> FormatRecord::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Err(EIO, "volume format record is not valid JSON");
  FormatRecord r;
  r.name = j.value("name", "");
  r.uuid = j.value("uuid", "");
  r.storage = j.value("storage", "");
  r.bucket = j.value("bucket", "");
  r.block_size = j.value("block_size", 4u << 20);
  r.version = j.value("version", 1);
  r.created_ns = j.value("created_ns", int64_t{0});
  r.session_timeout_s = j.value("session_timeout_s", 60);
  r.trash_days = j.value("trash_days", 0);
  r.changelog_hours = j.value("changelog_hours", 0);
  r.mirror_of = j.value("mirror_of", "");
  r.access_key = j.value("access_key", "");
  r.secret_key = j.value("secret_key", "");
  r.session_token = j.value("session_token", "");
  r.ceph_conf = j.value("ceph_conf", "");
  r.group_secret = j.value("group_secret", "");
  if (j.contains("source") && j["source"].is_object()) {
    const auto& src = j["source"];
    r.source_storage = src.value("storage", "");
    r.source_bucket = src.value("bucket", "");
    r.source_access_key = src.value("access_key", "");
    r.source_secret_key = src.value("secret_key", "");
    r.source_session_token = src.value("session_token", "");
    r.source_ceph_conf = src.value("ceph_conf", "");
  }
  if (r.version > kFormatVersion) {
    return Status::Err(EPROTO, "volume format version " + std::to_string(r.version) +
                                   " is newer than this tierfs understands (" + std::to_string(kFormatVersion) +
                                   "); upgrade tierfs");
  }
  return r;
}

}  // namespace tierfs
