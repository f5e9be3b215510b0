// tierfs quota set|get|list|delete|check META-URL (--path DIR | --uid UID | --gid GID)
// [--capacity SIZE] [--inodes N]: exact quotas of directory trees, users and groups
// (src/meta/quota_tx.h). `check` recounts usage from the namespace; --repair stores it.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"
#include "meta/meta.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, path, capacity, inodes;
  int64_t uid = -1, gid = -1;
  bool json = false, repair = false;
};

const char* KindName(QuotaKind k) { return k == QuotaKind::kDir ? "dir" : k == QuotaKind::kUser ? "user" : "group"; }

// Which quota the options name; none of them (list, check): *given false.
Status Target(Meta* meta, const Args& a, QuotaKind* kind, uint64_t* id, bool* given) {
  int n = (!a.path.empty()) + (a.uid >= 0) + (a.gid >= 0);
  if (n > 1) return Status::Err(EINVAL, "give one of --path, --uid and --gid");
  *given = n == 1;
  if (a.uid >= 0) {
    *kind = QuotaKind::kUser;
    *id = static_cast<uint64_t>(a.uid);
  } else if (a.gid >= 0) {
    *kind = QuotaKind::kGroup;
    *id = static_cast<uint64_t>(a.gid);
  } else if (!a.path.empty()) {
    *kind = QuotaKind::kDir;
    ASSIGN_OR_RETURN(*id, ResolveVolumePath(meta, a.path));
  }
  return Status::OK();
}

nlohmann::json ToJson(const Quota& q, const std::string& path) {
  nlohmann::json j = {{"kind", KindName(q.kind)},        {"id", q.id},
                      {"max_bytes", q.max_bytes},         {"max_inodes", q.max_inodes},
                      {"used_bytes", q.used_bytes},       {"used_inodes", q.used_inodes}};
  if (!path.empty()) j["path"] = path;
  return j;
}

// What names a quota: a directory quota's path in the volume (the root's is the volume's
// own limits), a uid or a gid.
std::string IdOf(Meta* meta, const Quota& q) {
  if (q.kind != QuotaKind::kDir) return std::to_string(q.id);
  auto path = meta->PathOf(q.id);
  return path.ok() ? *path : "inode " + std::to_string(q.id) + " (" + path.status().message() + ")";
}

void PrintTable(Meta* meta, const std::vector<Quota>& qs) {
  std::vector<std::string> ids;
  int width = 12;
  for (const Quota& q : qs) {
    ids.push_back(IdOf(meta, q));
    width = std::max(width, static_cast<int>(ids.back().size()));
  }
  std::printf("%-6s %-*s %12s %12s %12s %12s\n", "KIND", width, "ID", "USED", "CAPACITY", "INODES", "MAX-INODES");
  for (size_t i = 0; i < qs.size(); ++i) {
    const Quota& q = qs[i];
    std::printf("%-6s %-*s %12s %12s %12lld %12s\n", KindName(q.kind), width, ids[i].c_str(),
                FormatSize(static_cast<uint64_t>(std::max<int64_t>(0, q.used_bytes))).c_str(),
                q.max_bytes ? FormatSize(static_cast<uint64_t>(q.max_bytes)).c_str() : "-",
                static_cast<long long>(q.used_inodes), q.max_inodes ? std::to_string(q.max_inodes).c_str() : "-");
  }
}

int Run(const std::string& op, const Args& a) {
  const std::string what = "quota " + op;
  auto meta = OpenVolume(a.meta_url, op == "get" || op == "list" || (op == "check" && !a.repair));
  if (!meta.ok()) return Fail(what, meta.status());
  QuotaKind kind = QuotaKind::kDir;
  uint64_t id = 0;
  bool given = false;
  Status st = Target(meta->get(), a, &kind, &id, &given);
  if (!st.ok()) return Fail(what, st);
  if (!given && op != "list" && op != "check") {
    return Fail(what, Status::Err(EINVAL, "name the quota with --path, --uid or --gid"));
  }
  if (op == "set") {
    std::optional<int64_t> cap, inodes;
    if (!a.capacity.empty()) {
      auto c = ParseSize(a.capacity);
      if (!c.ok()) return Fail(what, c.status().With("--capacity"));
      cap = static_cast<int64_t>(*c);
    }
    if (!a.inodes.empty()) {
      auto n = ParseCount(a.inodes);
      if (!n.ok()) return Fail(what, n.status().With("--inodes"));
      inodes = static_cast<int64_t>(*n);
    }
    if (!cap && !inodes) return Fail(what, Status::Err(EINVAL, "give --capacity and/or --inodes (0: no limit)"));
    bool exact = true;
    st = (*meta)->SetQuota(kind, id, cap, inodes, &exact);
    if (!st.ok()) return Fail(what, st);
    if (!exact) {
      std::cerr << "tierfs quota set: usage was counted while the volume may have changed; run `tierfs quota check "
                   "--repair` when it is quiet to make it exact\n";
    }
  } else if (op == "delete") {
    st = (*meta)->DeleteQuota(kind, id);
    if (!st.ok()) return Fail(what, st);
    if (!a.json) std::cout << "deleted the quota of " << KindName(kind) << " " << id << "\n";
    return 0;
  }
  std::vector<Quota> qs;
  if (given) {
    auto q = (*meta)->GetQuota(kind, id);
    if (!q.ok()) return Fail(what, q.status());
    if (!*q) return Fail(what, Status::Err(ENOENT, std::string("no quota on ") + KindName(kind) + " " + std::to_string(id)));
    qs.push_back(**q);
  } else {
    auto l = (*meta)->ListQuotas();
    if (!l.ok()) return Fail(what, l.status());
    qs = *l;
  }
  if (op != "check") {
    if (a.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const Quota& q : qs) {
        out.push_back(ToJson(q, q.kind != QuotaKind::kDir ? "" : given ? a.path : IdOf(meta->get(), q)));
      }
      std::cout << (given && op != "list" ? out[0].dump() : out.dump()) << std::endl;
    } else {
      PrintTable(meta->get(), qs);
    }
    return 0;
  }
  // check: recount each quota and compare.
  int wrong = 0;
  nlohmann::json out = nlohmann::json::array();
  for (const Quota& q : qs) {
    auto counted = (*meta)->CountQuotaUsage(q.kind, q.id);
    if (!counted.ok()) return Fail(what, counted.status());
    bool ok = counted->used_bytes == q.used_bytes && counted->used_inodes == q.used_inodes;
    if (!ok) {
      ++wrong;
      std::cerr << KindName(q.kind) << " " << q.id << ": recorded " << q.used_bytes << " bytes, " << q.used_inodes
                << " inodes; counted " << counted->used_bytes << " bytes, " << counted->used_inodes << " inodes"
                << (a.repair ? " (repaired)" : "") << "\n";
      if (a.repair) {
        st = (*meta)->SetQuotaUsage(q.kind, q.id, counted->used_bytes, counted->used_inodes);
        if (!st.ok()) return Fail(what, st);
      }
    }
    nlohmann::json j = ToJson(*counted, "");
    j["max_bytes"] = q.max_bytes;
    j["max_inodes"] = q.max_inodes;
    j["recorded_bytes"] = q.used_bytes;
    j["recorded_inodes"] = q.used_inodes;
    j["ok"] = ok;
    out.push_back(j);
  }
  if (a.json) std::cout << out.dump() << std::endl;
  else std::cout << qs.size() << " quotas checked, " << wrong << (a.repair ? " repaired" : " wrong") << "\n";
  return wrong && !a.repair ? 1 : 0;
}

}  // namespace

void RegisterQuota(CLI::App& app, int* exit_code) {
  auto* quota = app.add_subcommand("quota", "Exact quotas of directory trees, users and groups");
  quota->require_subcommand(1);
  struct Op {
    const char* name;
    const char* help;
  };
  for (Op op : {Op{"set", "Set the limits of a quota (creating it; 0: no limit)"},
                Op{"get", "Show one quota"}, Op{"list", "Show every quota"},
                Op{"delete", "Remove a quota"},
                Op{"check", "Recount quota usage from the namespace (all quotas, or the one named)"}}) {
    auto args = std::make_shared<Args>();
    auto* sub = quota->add_subcommand(op.name, op.help);
    sub->add_option("META-URL", args->meta_url, "Metadata engine of the volume")->required();
    std::string name = op.name;
    if (name != "list") {
      sub->add_option("--path", args->path, "A directory of the volume, from its root (e.g. /teams/vision)");
      sub->add_option("--uid", args->uid, "A user id");
      sub->add_option("--gid", args->gid, "A group id");
    }
    if (name == "set") {
      sub->add_option("--capacity", args->capacity, "Bytes the tree, user or group may use (e.g. 500G; 0: no limit)");
      sub->add_option("--inodes", args->inodes, "Files and directories it may have (0: no limit)");
    }
    if (name == "check") sub->add_flag("--repair", args->repair, "Store the recounted usage");
    sub->add_flag("--json", args->json, "Print JSON");
    sub->callback([args, exit_code, name] { *exit_code = Run(name, *args); });
  }
}

}  // namespace tierfs::cmd
