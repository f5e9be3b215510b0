#include "meta/change_consumers.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "meta/change_log.h"

namespace tierfs {
namespace {

constexpr std::string_view kPrefix = "MC";
constexpr size_t kMaxRemembered = 1'000'000;  // past it, forget (objects are then held longer, never shorter)

Result<ChangeConsumer> Parse(std::string_view key, std::string_view v) {
  auto j = nlohmann::json::parse(v, nullptr, false);
  ChangeConsumer c;
  try {
    if (!j.is_object()) throw nlohmann::json::type_error::create(302, "not an object", nullptr);
    c.name = j.at("name").get<std::string>();
    c.what = j.value("what", "");
    c.applied = j.at("applied").get<uint64_t>();
    c.applied_ns = j.value("applied_ns", int64_t{0});
    c.updated_ns = j.at("updated_ns").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    return Status::Err(EIO, "the change-log consumer record " + std::string(key) +
                                " is damaged; remove it with `tierfs changelog META-URL --drop-consumer NAME`");
  }
  return c;
}

}  // namespace

std::string ChangeConsumerKey(const std::string& name) { return std::string(kPrefix) + name; }

Status PutChangeConsumer(KvEngine* engine, const ChangeConsumer& c) {
  if (c.name.empty()) return Status::Err(EINVAL, "a change-log consumer needs a name");
  const std::string v = nlohmann::json{{"name", c.name},
                                       {"what", c.what},
                                       {"applied", c.applied},
                                       {"applied_ns", c.applied_ns},
                                       {"updated_ns", c.updated_ns}}
                            .dump();
  UnloggedScope unlogged;  // a reader's position is not a change of the namespace
  return engine->Txn([&](KvTxn& t) { return t.Put(ChangeConsumerKey(c.name), v); });
}

Status DropChangeConsumer(KvEngine* engine, const std::string& name) {
  ASSIGN_OR_RETURN(auto all, ReadChangeConsumers(engine));
  if (std::none_of(all.begin(), all.end(), [&](const ChangeConsumer& c) { return c.name == name; })) {
    std::string names;
    for (const auto& c : all) names += (names.empty() ? "" : ", ") + c.name;
    return Status::Err(ENOENT, "no change-log consumer named " + name + " (registered: " +
                                   (names.empty() ? std::string("none") : names) + ")");
  }
  UnloggedScope unlogged;
  return engine->Txn([&](KvTxn& t) { return t.Delete(ChangeConsumerKey(name)); });
}

Result<std::vector<ChangeConsumer>> ReadChangeConsumers(KvEngine* engine) {
  std::vector<ChangeConsumer> out;
  Status bad;
  RETURN_IF_ERROR(engine->Txn(
      [&](KvTxn& t) -> Status {
        out.clear();
        bad = Status::OK();
        const std::string prefix(kPrefix);
        return t.Scan(prefix, PrefixEnd(prefix), 0, [&](std::string_view k, std::string_view v) {
          auto c = Parse(k, v);
          if (!c.ok()) {
            bad = c.status();
            return false;
          }
          out.push_back(std::move(*c));
          return true;
        });
      },
      true));
  if (!bad.ok()) return bad;
  return out;
}

Result<std::optional<uint64_t>> ChangeConsumersFloor(KvEngine* engine, int64_t now_ns) {
  ASSIGN_OR_RETURN(auto all, ReadChangeConsumers(engine));
  std::optional<uint64_t> floor;
  for (const auto& c : all) {
    if (c.Live(now_ns)) floor = std::min(floor.value_or(c.applied), c.applied);
  }
  return floor;
}

Result<std::vector<size_t>> ReleaseHold::MayGo(KvEngine* engine, const std::vector<std::string>& due_keys) {
  std::vector<size_t> out;
  ASSIGN_OR_RETURN(auto floor, ChangeConsumersFloor(engine, NowNanos()));
  std::lock_guard<std::mutex> l(mu_);
  if (!floor) {
    first_seen_.clear();
    for (size_t i = 0; i < due_keys.size(); ++i) out.push_back(i);
    return out;
  }
  // Read after the scan that found the keys due: each was released at or before `last`.
  ASSIGN_OR_RETURN(ChangeLogBounds bounds, ChangeLogRange(engine));
  if (first_seen_.size() > kMaxRemembered) first_seen_.clear();
  for (size_t i = 0; i < due_keys.size(); ++i) {
    auto it = first_seen_.emplace(due_keys[i], bounds.last).first;
    if (it->second <= *floor) {
      out.push_back(i);
      first_seen_.erase(it);
    }
  }
  return out;
}

}  // namespace tierfs
