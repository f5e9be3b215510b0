// tierfs gateway-user add|list|remove META-URL ...: the S3 gateway's users kept in the
// volume (gateway/users.h), known to every gateway of it within seconds.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "gateway/users.h"
#include "meta/meta.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, access_key, secret_key_file;
  int64_t uid = -1, gid = -1;
  std::vector<std::string> buckets;
  bool read_only = false, json = false;
};

// The secret from --secret-key-file, else $TIERFS_GATEWAY_SECRET_KEY (never the command line).
Result<std::string> Secret(const Args& a) {
  auto s = gateway::ReadSecretKey(a.secret_key_file);
  if (s.ok() && s->empty()) {
    return Status::Err(EINVAL, "give the user's secret key with --secret-key-file FILE or $TIERFS_GATEWAY_SECRET_KEY");
  }
  return s;
}

int Add(const Args& a) {
  auto secret = Secret(a);
  if (!secret.ok()) return Fail("gateway-user add", secret.status());
  auto meta = OpenVolume(a.meta_url, false);
  if (!meta.ok()) return Fail("gateway-user add", meta.status());
  gateway::GatewayUser u;
  u.access_key = a.access_key;
  u.secret_key = *secret;
  u.uid = a.uid >= 0 ? static_cast<uint32_t>(a.uid) : getuid();
  u.gid = a.gid >= 0 ? static_cast<uint32_t>(a.gid) : getgid();
  u.read_only = a.read_only;
  u.buckets = a.buckets;
  u.display_name = a.access_key;
  Status st = gateway::Users::Add((*meta)->engine(), u);
  if (!st.ok()) return Fail("gateway-user add", st);
  std::cout << "gateway user " << u.access_key << " (uid " << u.uid << ", gid " << u.gid
            << (u.read_only ? ", read-only" : "") << ") added\n";
  return 0;
}

int List(const Args& a) {
  auto meta = OpenVolume(a.meta_url, true);
  if (!meta.ok()) return Fail("gateway-user list", meta.status());
  auto users = gateway::Users::List((*meta)->engine());
  if (!users.ok()) return Fail("gateway-user list", users.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& u : *users) {
    // Secrets are never shown.
    out.push_back({{"access_key", u.access_key}, {"uid", u.uid}, {"gid", u.gid}, {"read_only", u.read_only},
                   {"buckets", u.buckets}});
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& u : out) {
    std::string buckets;
    for (const auto& b : u["buckets"]) buckets += (buckets.empty() ? "" : ",") + b.get<std::string>();
    std::cout << u["access_key"].get<std::string>() << "  uid " << u["uid"] << "  gid " << u["gid"]
              << (u["read_only"].get<bool>() ? "  read-only" : "") << (buckets.empty() ? "" : "  buckets " + buckets)
              << "\n";
  }
  return 0;
}

int Remove(const Args& a) {
  auto meta = OpenVolume(a.meta_url, false);
  if (!meta.ok()) return Fail("gateway-user remove", meta.status());
  Status st = gateway::Users::Remove((*meta)->engine(), a.access_key);
  if (!st.ok()) return Fail("gateway-user remove", st);
  std::cout << "gateway user " << a.access_key << " removed (running gateways forget it within seconds)\n";
  return 0;
}

}  // namespace

void RegisterGatewayUser(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("gateway-user", "Users of the S3 gateway, kept in the volume");
  sub->require_subcommand(1);
  auto* add = sub->add_subcommand("add", "Add (or replace) a user");
  add->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  add->add_option("ACCESS-KEY", a->access_key, "The user's access key")->required();
  add->add_option("--secret-key-file", a->secret_key_file,
                  "File holding the user's secret key (or $TIERFS_GATEWAY_SECRET_KEY; never on the command line)");
  add->add_option("--uid", a->uid, "The user objects are made and checked as (default: this process's)");
  add->add_option("--gid", a->gid, "The group (default: this process's)");
  add->add_option("--bucket", a->buckets, "A bucket granted besides the user's own (repeatable)");
  add->add_flag("--read-only", a->read_only, "Reads and listings only");
  add->callback([a, exit_code] { *exit_code = Add(*a); });
  auto* list = sub->add_subcommand("list", "List the users (never their secrets)");
  list->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  list->add_flag("--json", a->json, "JSON output");
  list->callback([a, exit_code] { *exit_code = List(*a); });
  auto* rm = sub->add_subcommand("remove", "Remove a user");
  rm->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  rm->add_option("ACCESS-KEY", a->access_key, "The user's access key")->required();
  rm->callback([a, exit_code] { *exit_code = Remove(*a); });
}

}  // namespace tierfs::cmd
