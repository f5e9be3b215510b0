#include "meta/mirror_state.h"

#include <nlohmann/json.hpp>

namespace tierfs {

std::string MirrorStateKey() { return "MS"; }
std::string MirrorLeaseKey() { return "ML"; }

std::string MirrorState::ToJson() const {
  return nlohmann::json{{"primary", primary},           {"applied", applied},
                        {"applied_ns", applied_ns},     {"seeding", seeding},
                        {"ready_at", ready_at},         {"primary_last", primary_last},
                        {"checked_ns", checked_ns},     {"block_lag_bytes", block_lag_bytes}}
      .dump();
}

Result<MirrorState> MirrorState::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return Status::Err(EIO, "the mirror state record (key MS) is not a JSON object");
  MirrorState s;
  try {
    s.primary = j.at("primary").get<std::string>();
    s.applied = j.at("applied").get<uint64_t>();
    s.applied_ns = j.value("applied_ns", int64_t{0});
    s.seeding = j.at("seeding").get<bool>();
    s.ready_at = j.value("ready_at", uint64_t{0});
    s.primary_last = j.value("primary_last", uint64_t{0});
    s.checked_ns = j.value("checked_ns", int64_t{0});
    s.block_lag_bytes = j.value("block_lag_bytes", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    return Status::Err(EIO, std::string("the mirror state record (key MS) is damaged: ") + e.what());
  }
  return s;
}

Result<std::optional<MirrorState>> ReadMirrorState(KvTxn& t) {
  ASSIGN_OR_RETURN(auto v, t.Get(MirrorStateKey()));
  if (!v) return std::optional<MirrorState>();
  ASSIGN_OR_RETURN(auto s, MirrorState::FromJson(*v));
  return std::optional<MirrorState>(std::move(s));
}

Result<std::optional<MirrorState>> ReadMirrorState(KvEngine* engine) {
  std::optional<MirrorState> out;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        ASSIGN_OR_RETURN(out, ReadMirrorState(t));
        return Status::OK();
      },
      true));
  return out;
}

Status WriteMirrorState(KvTxn& t, const MirrorState& s) { return t.Put(MirrorStateKey(), s.ToJson()); }

Result<std::optional<MirrorLease>> ReadMirrorLease(KvTxn& t) {
  ASSIGN_OR_RETURN(auto v, t.Get(MirrorLeaseKey()));
  if (!v) return std::optional<MirrorLease>();
  auto j = nlohmann::json::parse(*v, nullptr, false);
  if (!j.is_object() || !j.contains("holder") || !j.contains("until_ns")) {
    return Status::Err(EIO, "the mirror lease record (key ML) is damaged");
  }
  MirrorLease l;
  try {
    l.holder = j.at("holder").get<std::string>();
    l.until_ns = j.at("until_ns").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    return Status::Err(EIO, "the mirror lease record (key ML) is damaged");
  }
  return std::optional<MirrorLease>(l);
}

Status WriteMirrorLease(KvTxn& t, const MirrorLease& l) {
  return t.Put(MirrorLeaseKey(), nlohmann::json{{"holder", l.holder}, {"until_ns", l.until_ns}}.dump());
}

}  // namespace tierfs
