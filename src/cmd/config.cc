// tierfs config META-URL [--access-key AK] [--secret-key SK] [--bucket B] ...: shows or
// changes a volume's settings without reformatting (new keys after a rotation, a moved
// bucket, a different session timeout); --take-bucket makes this engine the owner of the
// volume's objects (after moving the volume to it with dump and load).
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/bucket_claim.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/secret.h"
#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/object_store.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, storage, bucket, access_key, secret_key, session_token, ceph_conf;
  int session_timeout = 0;
  int trash_days = -1;
  int changelog_hours = -1;
  std::string capacity, inodes;
  bool no_check = false;
  bool take_bucket = false;
};

void Print(const FormatRecord& raw) {
  FormatRecord f = raw.Redacted();
  nlohmann::json j = nlohmann::json::parse(f.ToJson());
  std::cout << j.dump(2) << std::endl;
}

int Run(const Args& a) {
  auto engine = OpenKvEngine(a.meta_url, MissingDatabase::kMustExist);
  if (!engine.ok()) return Fail("config", engine.status());
  bool storage_change = !a.storage.empty() || !a.bucket.empty() || !a.access_key.empty() ||
                        !a.secret_key.empty() || !a.session_token.empty() || !a.ceph_conf.empty();
  std::optional<int64_t> cap, inodes;
  Status lst = ParseVolumeLimits(a.capacity, a.inodes, &cap, &inodes);
  if (!lst.ok()) return Fail("config", lst);
  if (a.trash_days > 3650) return Fail("config", Status::Err(EINVAL, "--trash-days must be 0 to 3650"));
  if (a.changelog_hours > 24 * 3650) return Fail("config", Status::Err(EINVAL, "--changelog-hours must be 0 to 87600"));
  bool change = storage_change || a.session_timeout != 0 || a.trash_days >= 0 || a.changelog_hours >= 0;
  if (a.changelog_hours >= 0) {
    // Clients read whether to log when they open the volume: switching it on or off under a
    // mounted client would leave its changes out of the log, and consumers would miss them.
    auto fmt = Meta::ReadFormat(engine->get());
    if (!fmt.ok()) return Fail("config", fmt.status());
    if ((fmt->changelog_hours > 0) != (a.changelog_hours > 0)) {
      auto meta = Meta::Open(OpenKvEngine(a.meta_url, MissingDatabase::kMustExist).value());
      if (!meta.ok()) return Fail("config", meta.status());
      auto sessions = (*meta)->ListSessions();
      if (!sessions.ok()) return Fail("config", sessions.status());
      if (!sessions->empty()) {
        return Fail("config", Status::Err(EBUSY, std::to_string(sessions->size()) +
                                                     " client(s) have the volume open (see `tierfs status`); unmount "
                                                     "them before switching the change log on or off"));
      }
    }
  }
  if (cap || inodes) {
    // The volume's limits are the root directory's quota.
    auto meta = OpenVolume(a.meta_url, false);
    if (!meta.ok()) return Fail("config", meta.status());
    Status st = (*meta)->SetQuota(QuotaKind::kDir, kRootIno, cap, inodes);
    if (!st.ok()) return Fail("config", st.With("setting --capacity/--inodes"));
    std::cout << "volume limits set" << std::endl;
    if (!change && !a.take_bucket) return 0;
  }
  if (a.session_timeout != 0 && (a.session_timeout < 1 || a.session_timeout > 86400)) {
    return Fail("config", Status::Err(EINVAL, "--session-timeout must be between 1 and 86400 seconds"));
  }
  auto updated = Meta::UpdateFormat(engine->get(), [&](FormatRecord& rec) -> Status {
    if (!change) return Status::Err(ECANCELED, "");
    if (!a.storage.empty()) rec.storage = a.storage;
    if (!a.bucket.empty()) rec.bucket = rec.storage == "file" ? AbsPath(a.bucket) : a.bucket;
    RETURN_IF_ERROR(ResolveStorageCredentials(a.access_key, a.secret_key, a.session_token, a.ceph_conf, &rec));
    if (a.session_timeout != 0) rec.session_timeout_s = a.session_timeout;
    if (a.trash_days >= 0) rec.trash_days = a.trash_days;
    if (a.changelog_hours >= 0) rec.changelog_hours = a.changelog_hours;
    if (storage_change && !a.no_check) {
      // Refuse settings that cannot reach the store, before they reach every client.
      ASSIGN_OR_RETURN(auto store, CreateObjectStore(rec.Spec()));
      Status st = store->Init();
      if (!st.ok()) return Status::Err(st.code(), "the new storage settings do not work: " + st.message());
    }
    return Status::OK();
  });
  if (!updated.ok() && updated.status().code() == ECANCELED && a.take_bucket) {
    auto fmt = Meta::ReadFormat(engine->get());
    if (!fmt.ok()) return Fail("config", fmt.status());
    Status st = TakeBucketAndSay(engine->get(), *fmt);
    return st.ok() ? 0 : Fail("config --take-bucket", st);
  }
  if (!updated.ok() && updated.status().code() == ECANCELED) {
    // No change asked for: show the settings.
    auto meta = Meta::Open(std::move(*engine));
    if (!meta.ok()) return Fail("config", meta.status());
    Print((*meta)->format());
    return 0;
  }
  if (!updated.ok()) return Fail("config", updated.status());
  std::cout << "updated volume " << updated->name << "; mounted clients pick up new storage settings when "
            << "they remount, a new trash retention within a minute" << std::endl;
  Print(*updated);
  if (a.take_bucket) {
    Status st = TakeBucketAndSay(engine->get(), *updated);
    if (!st.ok()) return Fail("config --take-bucket", st);
  }
  return 0;
}

}  // namespace

void RegisterConfig(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("config", "Show or change a volume's settings without reformatting");
  sub->add_option("META-URL", args->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("--storage", args->storage, "New object storage type (file, s3, rados, azure)");
  sub->add_option("--bucket", args->bucket, "New bucket (see `tierfs format --help`)");
  AddCredentialOptions(sub, &args->access_key, &args->secret_key, &args->session_token, &args->ceph_conf);
  sub->add_option("--session-timeout", args->session_timeout, "New session timeout in seconds");
  sub->add_option("--trash-days", args->trash_days,
                  "Days removed files stay in the trash (0: no trash; what it holds goes within a minute)");
  sub->add_option("--changelog-hours", args->changelog_hours,
                  "Hours the change log keeps its records (0: no change log; switching it on or off needs every "
                  "client unmounted)");
  sub->add_option("--capacity", args->capacity, "Bytes the volume may hold (0: no limit)");
  sub->add_option("--inodes", args->inodes, "Files and directories the volume may hold (0: no limit)");
  sub->add_flag("--no-check", args->no_check, "Do not check that the new storage settings work");
  sub->add_flag("--take-bucket", args->take_bucket,
                "Make this metadata engine the owner of the volume's objects (after `tierfs load` moved the volume "
                "here, once the engine it came from is no longer used): only the owner's clients write or delete "
                "objects");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
