// tierfs status META-URL [--json]: settings, live sessions and usage of a volume.
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/clock.h"
#include "common/size.h"
#include "common/secret.h"
#include "meta/change_consumers.h"
#include "meta/change_log.h"
#include "meta/mirror_state.h"
#include "meta/meta.h"
#include "tools/staged_upload.h"

namespace tierfs::cmd {
namespace {

// The cache and store counters of a mount of this host (its root's "tierfs.stats" xattr),
// or null when the mount is not reachable from here.
nlohmann::json MountStats(const SessionInfo& s) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  if (s.host != host || s.mountpoint.empty()) return nullptr;
  std::string buf(1 << 14, '\0');
  ssize_t n = getxattr(s.mountpoint.c_str(), "tierfs.stats", buf.data(), buf.size());
  if (n <= 0) return nullptr;
  auto j = nlohmann::json::parse(buf.substr(0, static_cast<size_t>(n)), nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

std::string ThisHost() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

// Staging areas of write-back clients that died with slices still marked staged: their
// blocks wait on that host's disk, nowhere else. On this host the area is looked at.
nlohmann::json DeadStaging(Meta* meta, const FormatRecord& f) {
  nlohmann::json out = nlohmann::json::array();
  auto areas = meta->StagingAreas();
  if (!areas.ok()) return out;
  const std::string here = ThisHost();
  std::set<std::string> seen;  // areas of this host the metadata knows of
  for (const auto& a : *areas) {
    if (a.host == here && !a.dir.empty()) seen.insert(a.dir);
    if (a.alive || a.slices == 0) continue;
    nlohmann::json j = {{"sid", a.sid}, {"host", a.host}, {"dir", a.dir}, {"slices", a.slices}};
    if (!a.dir.empty() && a.host == here) {
      StagedFiles found = CountStaged(a.dir);
      j["local_blocks"] = found.blocks;
      j["local_bytes"] = found.bytes;
    }
    out.push_back(j);
  }
  // Areas of clients that recorded none (older ones) in this host's default cache directory.
  for (const std::string& dir : StagingDirsFor(CacheArgs{}, f)) {
    StagedFiles found = CountStaged(dir);
    if (found.blocks > 0 && !seen.count(dir)) {
      out.push_back({{"sid", 0}, {"host", here}, {"dir", dir}, {"slices", 0}, {"local_blocks", found.blocks},
                     {"local_bytes", found.bytes}});
    }
  }
  return out;
}

// "2026-11-25 19:00 UTC".
std::string UtcMinute(int64_t ns) {
  time_t secs = static_cast<time_t>(ns / 1000000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

int Run(const std::string& meta_url, bool json) {
  auto meta = OpenVolume(meta_url, true);
  if (!meta.ok()) return Fail("status", meta.status());
  const FormatRecord& f = (*meta)->format();
  auto sessions = (*meta)->ListSessions();
  if (!sessions.ok()) return Fail("status", sessions.status());
  auto purged = (*meta)->ListPurgedSessions();
  if (!purged.ok()) return Fail("status", purged.status());
  auto usage = (*meta)->GetStatFs();
  if (!usage.ok()) return Fail("status", usage.status());
  auto trash = (*meta)->GetTrashUsage();
  if (!trash.ok()) return Fail("status", trash.status());
  auto quotas = (*meta)->ListQuotas();
  if (!quotas.ok()) return Fail("status", quotas.status());
  auto log = ChangeLogRange((*meta)->engine());
  if (!log.ok()) return Fail("status", log.status());
  std::optional<Quota> limits;
  for (const Quota& q : *quotas) {
    if (q.kind == QuotaKind::kDir && q.id == kRootIno) limits = q;
  }
  int64_t now = NowNanos();
  nlohmann::json j = {{"name", f.name},       {"uuid", f.uuid},
                      {"storage", f.storage}, {"bucket", f.bucket},
                      {"block_size", f.block_size}, {"format_version", f.version},
                      {"session_timeout_s", f.session_timeout_s},
                      {"used_bytes", usage->used_bytes}, {"inodes", usage->inodes},
                      {"trash_days", f.trash_days},
                      {"changelog", {{"hours", f.changelog_hours}, {"first_seq", log->first}, {"last_seq", log->last}}},
                      {"trash", {{"bytes", trash->bytes}, {"entries", trash->entries}, {"hours", trash->hours},
                                 {"first_expiry_ns", trash->first_expiry_ns},
                                 {"last_expiry_ns", trash->last_expiry_ns}}},
                      {"capacity", limits ? limits->max_bytes : 0}, {"max_inodes", limits ? limits->max_inodes : 0},
                      {"quotas", quotas->size()}};
  // Registered readers of the change log (mirrors): the log and released data kept for them.
  auto consumers = ReadChangeConsumers((*meta)->engine());
  if (!consumers.ok()) return Fail("status", consumers.status());
  std::string consumer_lines;
  nlohmann::json cj = nlohmann::json::array();
  for (const ChangeConsumer& c : *consumers) {
    const uint64_t behind = log->last > c.applied ? log->last - c.applied : 0;
    const bool live = c.Live(now);
    cj.push_back({{"name", c.name}, {"what", c.what}, {"applied_seq", c.applied}, {"behind", behind},
                  {"updated_ns", c.updated_ns}, {"live", live}});
    consumer_lines += "  reader " + c.name + ": commit " + std::to_string(c.applied) + " (" + std::to_string(behind) +
                      " behind), last heard " + std::to_string((now - c.updated_ns) / 1'000'000'000) + " s ago" +
                      (live ? "" : " (silent over a week: holds nothing back)") + "\n";
  }
  j["changelog"]["consumers"] = cj;
  if (!f.source_storage.empty()) j["source"] = {{"storage", f.source_storage}, {"bucket", f.source_bucket}};
  // A mirror: where it stands against its primary (meta/mirror_state.h). Lag in seconds:
  // behind, the age of the last commit applied; caught up, the time since the replicator
  // last found nothing new.
  std::string mirror_line;
  if (!f.mirror_of.empty()) {
    auto ms = ReadMirrorState((*meta)->engine());
    if (!ms.ok()) return Fail("status", ms.status());
    if (*ms) {
      const MirrorState& m = **ms;
      const uint64_t behind = m.primary_last > m.applied ? m.primary_last - m.applied : 0;
      const double lag_s = (now - (behind ? m.applied_ns : m.checked_ns)) / 1e9;
      j["mirror"] = {{"primary", m.primary},           {"applied_seq", m.applied},
                     {"applied_ns", m.applied_ns},     {"seeding", m.seeding},
                     {"ready_at_seq", m.ready_at},     {"primary_last_seq", m.primary_last},
                     {"checked_ns", m.checked_ns},
                     {"lag", {{"commits", behind}, {"seconds", lag_s}, {"bytes", m.block_lag_bytes}}}};
      char secs[32];
      snprintf(secs, sizeof secs, "%.1f", lag_s);
      mirror_line = "mirror of:  " + m.primary + (m.seeding ? " (seeding: not readable until commit " +
                                                                  std::to_string(m.ready_at) + " is applied)"
                                                            : "") +
                    "\n  applied:  commit " + std::to_string(m.applied) + "; the primary had " +
                    std::to_string(m.primary_last) + " when last checked\n  lag:      " + std::to_string(behind) +
                    " commits, " + secs + " s\n";
    }
  }
  nlohmann::json ss = nlohmann::json::array();
  nlohmann::json groups = nlohmann::json::object();  // name -> members, capacity, use
  for (const auto& s : *sessions) {
    ss.push_back({{"sid", s.sid},
                  {"host", s.host},
                  {"pid", s.pid},
                  {"mountpoint", s.mountpoint},
                  {"version", s.version},
                  {"started_ns", s.started_ns},
                  {"heartbeat_age_s", s.heartbeat_ns ? (now - s.heartbeat_ns) / 1e9 : -1.0},
                  {"staged_bytes", s.staged_bytes}});
    if (s.resumed_from) {
      ss.back()["resumed_from"] = s.resumed_from;
      ss.back()["lost_ns"] = s.lost_ns;
      ss.back()["lost_files"] = s.lost_files;
      ss.back()["lost_locks"] = s.lost_locks;
    }
    if (auto st = MountStats(s); !st.is_null()) ss.back()["cache"] = st;
    if (!s.cache_group.empty()) {
      ss.back()["cache_group"] = s.cache_group;
      nlohmann::json& g = groups[s.cache_group];
      if (g.is_null()) g = {{"capacity", 0}, {"used", 0}, {"members", nlohmann::json::array()}};
      g["capacity"] = g.value("capacity", uint64_t{0}) + s.group_capacity;
      g["used"] = g.value("used", uint64_t{0}) + s.group_used;
      g["members"].push_back({{"sid", s.sid},
                              {"host", s.host},
                              {"addr", s.group_addr},
                              {"serving", !s.group_addr.empty()},
                              {"mountpoint", s.mountpoint},
                              {"capacity", s.group_capacity},
                              {"used", s.group_used}});
    }
  }
  j["sessions"] = ss;
  nlohmann::json ended = nlohmann::json::array();
  for (const auto& p : *purged) {
    ended.push_back({{"sid", p.info.sid},
                     {"host", p.info.host},
                     {"pid", p.info.pid},
                     {"mountpoint", p.info.mountpoint},
                     {"last_heartbeat_ns", p.info.heartbeat_ns},
                     {"ended_ns", p.purged_ns},
                     {"ended_by", p.purged_by},
                     {"ended_by_host", p.purged_by_host},
                     {"cleaned", p.done}});
  }
  j["ended_sessions"] = ended;
  j["staged_left"] = DeadStaging(meta->get(), f);
  j["cache_groups"] = groups;
  if (!f.access_key.empty()) j["access_key"] = f.access_key;
  if (!f.secret_key.empty()) j["secret_key"] = Redact(f.secret_key);
  if (!f.ceph_conf.empty()) j["ceph_conf"] = f.ceph_conf;
  // What a server's loss could lose, as the engine's servers say now (mount
  // --require-safe-meta refuses an engine that is not safe).
  auto durability = (*meta)->engine()->Durability();
  if (durability.ok()) {
    j["meta_durability"] = {{"safe", durability->safe}, {"summary", durability->summary}, {"risks", durability->risks}};
  } else {
    j["meta_durability"] = {{"safe", false}, {"error", durability.status().message()}};
  }
  if (json) {
    std::cout << j.dump(2) << std::endl;
    return 0;
  }
  std::cout << "volume:     " << f.name << " (uuid " << f.uuid << ", format version " << f.version << ")\n"
            << "storage:    " << f.storage << " " << f.bucket
            << (f.access_key.empty() ? "" : " (access key " + f.access_key + ", secret key " + Redact(f.secret_key) + ")")
            << "\n"
            << "block size: " << FormatSize(f.block_size) << "\n"
            << "usage:      " << FormatSize(usage->used_bytes) << " in " << usage->inodes << " inodes"
            << (limits && limits->max_bytes ? " (capacity " + FormatSize(static_cast<uint64_t>(limits->max_bytes)) + ")" : "")
            << (limits && limits->max_inodes ? " (at most " + std::to_string(limits->max_inodes) + " inodes)" : "") << "\n"
            << "trash:      " << (f.trash_days > 0 ? std::to_string(f.trash_days) + " days: " : "off: ")
            << FormatSize(trash->bytes) << " in " << trash->entries << " entries over " << trash->hours << " hours"
            << (trash->hours == 0 ? std::string()
                : trash->first_expiry_ns <= now
                    ? "; freed within a minute (past its retention)"
                    : "; freed hour by hour from " + UtcMinute(trash->first_expiry_ns) + " until " +
                          UtcMinute(trash->last_expiry_ns) + " (`tierfs config --trash-days 0` frees it now)")
            << "\n"
            << "change log: "
            << (f.changelog_hours > 0 ? std::to_string(f.changelog_hours) + " hours: " : "off")
            << (f.changelog_hours == 0 && log->last == 0 ? std::string()
                : log->first > log->last ? "empty (the next record is " + std::to_string(log->last + 1) + ")"
                                         : "records " + std::to_string(log->first) + " to " + std::to_string(log->last))
            << "\n"
            << consumer_lines
            << (f.source_storage.empty() ? std::string()
                                         : "blocks:     copied from " + f.source_storage + " " + f.source_bucket +
                                               " (read through when not copied yet)\n")
            << mirror_line
            << "metadata:   "
            << (durability.ok() ? durability->summary + (durability->safe ? ": safe against one server's loss"
                                                                          : ": not safe against one server's loss")
                                : "durability unknown (" + durability.status().message() + ")")
            << "\n";
  if (durability.ok()) {
    for (const auto& r : durability->risks) std::cout << "  - " << r << "\n";
  }
  std::cout << "quotas:     " << quotas->size() << " (tierfs quota list)\n"
            << "sessions:   " << sessions->size() << "\n";
  for (const auto& s : *sessions) {
    std::cout << "  #" << s.sid << " " << s.host << " pid " << s.pid << " on " << s.mountpoint << " (tierfs "
              << s.version << ")\n";
    if (s.resumed_from) {
      std::cout << "      resumed:      its session #" << s.resumed_from << " was ended by another client "
                << (now - s.lost_ns) / 1000000000 << " s ago (no heartbeat for the session timeout); "
                << s.lost_locks << " open files lost their locks, " << s.lost_files
                << " open unlinked files were freed (EIO)\n";
    }
    if (s.staged_bytes > 0) {
      std::cout << "      write-back:   " << FormatSize(s.staged_bytes) << " staged, not yet in the object store\n";
    }
    auto st = MountStats(s);
    if (st.is_null()) continue;
    const auto& m = st["memory"];
    const auto& d = st["disk"];
    const auto& o = st["store"];
    std::cout << "      memory cache: " << FormatSize(m.value("bytes", 0ull)) << " of "
              << FormatSize(m.value("capacity", 0ull)) << ", " << m.value("hits", 0ull) << " hits, "
              << m.value("misses", 0ull) << " misses\n"
              << "      disk cache:   " << FormatSize(d.value("bytes", 0ull)) << " of "
              << FormatSize(d.value("capacity", 0ull)) << " in " << d.value("blocks", 0ull) << " blocks, "
              << d.value("hits", 0ull) << " hits, " << d.value("misses", 0ull) << " misses, "
              << d.value("evictions", 0ull) << " evictions, " << d.value("dirs_down", 0) << " of "
              << d.value("dirs", 0) << " dirs down\n"
              << "      object store: " << o.value("gets", 0ull) << " gets ("
              << FormatSize(o.value("bytes_downloaded", 0ull)) << "), " << o.value("puts", 0ull) << " puts ("
              << FormatSize(o.value("bytes_uploaded", 0ull)) << ")\n";
  }
  for (const auto& d : j["staged_left"]) {
    std::string dir = d.value("dir", "");
    std::string host = d.value("host", "");
    std::cout << "not uploaded: ";
    if (d.value("sid", uint64_t{0}) != 0) {
      std::cout << "session #" << d.value("sid", uint64_t{0}) << " (host " << (host.empty() ? "?" : host)
                << ", no longer running) left " << d.value("slices", uint64_t{0})
                << " slices staged for write-back" << (dir.empty() ? "" : " in " + dir);
    } else {
      std::cout << dir << " holds blocks a write-back client staged";
    }
    if (d.contains("local_blocks")) {
      std::cout << " (" << d.value("local_blocks", uint64_t{0}) << " blocks, "
                << FormatSize(d.value("local_bytes", uint64_t{0})) << " there now)";
    }
    std::cout << ": written and closed data that is not in the object store. Do not delete that folder (it is not "
              << "cache); mount the volume again on " << (host.empty() ? "that host" : host)
              << " with the same cache directory (the mount uploads it first), or run `tierfs upload-staged "
              << meta_url << " " << (dir.empty() ? "CACHE-DIR" : dir) << "` there\n";
  }
  for (const auto& [name, g] : groups.items()) {
    std::cout << "cache group " << name << ": " << g["members"].size() << " members, "
              << FormatSize(g.value("used", uint64_t{0})) << " cached of " << FormatSize(g.value("capacity", uint64_t{0}))
              << "\n";
    for (const auto& m : g["members"]) {
      std::string addr = m.value("addr", "");
      std::string mp = m.value("mountpoint", "");
      std::cout << "  #" << m.value("sid", uint64_t{0}) << " " << m.value("host", "") << " "
                << (addr.empty() ? "reader (--no-sharing)" : addr) << " "
                << (mp.empty() ? std::string("cache-server") : "on " + mp) << ": "
                << FormatSize(m.value("used", uint64_t{0})) << " of " << FormatSize(m.value("capacity", uint64_t{0}))
                << "\n";
    }
  }
  if (!purged->empty()) std::cout << "sessions ended by other clients in the last day (no heartbeat for the timeout):\n";
  for (const auto& p : *purged) {
    std::cout << "  #" << p.info.sid << " " << p.info.host << " pid " << p.info.pid << " on " << p.info.mountpoint
              << ": silent " << (p.purged_ns - p.info.heartbeat_ns) / 1000000000 << " s, ended "
              << (now - p.purged_ns) / 1000000000 << " s ago by "
              << (p.purged_by_host.empty() ? std::string("an offline tool") : p.purged_by_host) << " #" << p.purged_by
              << (p.done ? "" : " (cleanup pending)") << "\n";
  }
  return 0;
}

}  // namespace

void RegisterStatus(CLI::App& app, int* exit_code) {
  auto url = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("status", "Show a volume's settings, live sessions and usage");
  sub->add_option("META-URL", *url, "Metadata engine of the volume")->required();
  sub->add_flag("--json", *json, "Print JSON");
  sub->callback([url, json, exit_code] { *exit_code = Run(*url, *json); });
}

}  // namespace tierfs::cmd
