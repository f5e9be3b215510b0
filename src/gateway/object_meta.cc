#include "gateway/object_meta.h"

#include <nlohmann/json.hpp>

namespace tierfs::gateway {

std::string ObjectMeta::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (!etag.empty()) {
    j["etag"] = etag;
    j["seq"] = seq;
  }
  if (!content_type.empty()) j["ct"] = content_type;
  if (!user.empty()) j["meta"] = user;
  if (!checksums.empty()) j["cks"] = checksums;
  if (!headers.empty()) j["hdr"] = headers;
  if (parts) j["parts"] = parts;
  if (!dir.empty()) j["dir"] = dir;
  return j.dump();
}

std::optional<ObjectMeta> ObjectMeta::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  ObjectMeta m;
  try {
    m.etag = j.value("etag", "");
    m.seq = j.value("seq", uint64_t{0});
    m.content_type = j.value("ct", "");
    if (j.contains("meta")) m.user = j["meta"].get<std::map<std::string, std::string>>();
    if (j.contains("cks")) m.checksums = j["cks"].get<std::map<std::string, std::string>>();
    if (j.contains("hdr")) m.headers = j["hdr"].get<std::map<std::string, std::string>>();
    m.parts = j.value("parts", 0u);
    m.dir = j.value("dir", "");
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return m;
}

}  // namespace tierfs::gateway
