// The tierfs command: one subcommand per file in this folder.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "cmd/commands.h"
#include "cmd/mount_helper.h"
#include "cmd/util.h"
#include "common/crash_report.h"
#include "common/duration.h"
#include "meta/meta_retry_timeout.h"

int main(int argc, char** argv) {
  tierfs::InstallCrashReport();
  // Commands print their results on stdout (often JSON); warnings from the layers below
  // go to stderr. `mount` replaces this logger with its log file.
  spdlog::set_default_logger(spdlog::stderr_color_mt("cli"));
  // Named, so that help says "Usage: tierfs [OPTIONS]" and "tierfs format ...".
  CLI::App app{"TierFS: a distributed POSIX file system on object storage", "tierfs"};
  app.require_subcommand(1);
  // Options of the whole program may follow the subcommand: `tierfs mount URL DIR
  // --meta-retry-timeout 2m`. Subcommands inherit this (and so pass on what they do not know).
  app.fallthrough();
  app.add_option_function<std::string>(
         "--meta-retry-timeout",
         [](const std::string& text) {
           std::chrono::milliseconds bound{};
           if (!tierfs::ParseDuration(text, &bound) || bound.count() <= 0) {
             throw CLI::ValidationError("--meta-retry-timeout",
                                        "expected a duration such as 30s, 2m or 500ms, not '" + text + "'");
           }
           tierfs::SetMetaRetryTimeout(bound);
         },
         "How long a metadata operation keeps retrying an unreachable or failing-over server (Redis, "
         "PostgreSQL, etcd) before it fails with EIO; overrides the META-URL's ?timeout= (default 30s)")
      ->type_name("DURATION");
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  int exit_code = 0;
  tierfs::cmd::RegisterFormat(app, &exit_code);
  tierfs::cmd::RegisterMount(app, &exit_code);
  tierfs::cmd::RegisterUmount(app, &exit_code);
  tierfs::cmd::RegisterStatus(app, &exit_code);
  tierfs::cmd::RegisterInfo(app, &exit_code);
  tierfs::cmd::RegisterGc(app, &exit_code);
  tierfs::cmd::RegisterFsck(app, &exit_code);
  tierfs::cmd::RegisterConfig(app, &exit_code);
  tierfs::cmd::RegisterDump(app, &exit_code);
  tierfs::cmd::RegisterLoad(app, &exit_code);
  tierfs::cmd::RegisterObjbench(app, &exit_code);
  tierfs::cmd::RegisterWarmup(app, &exit_code);
  tierfs::cmd::RegisterCacheServer(app, &exit_code);
  tierfs::cmd::RegisterUploadStaged(app, &exit_code);
  tierfs::cmd::RegisterCompact(app, &exit_code);
  tierfs::cmd::RegisterRmr(app, &exit_code);
  tierfs::cmd::RegisterClone(app, &exit_code);
  tierfs::cmd::RegisterQuota(app, &exit_code);
  tierfs::cmd::RegisterRestore(app, &exit_code);
  tierfs::cmd::RegisterStats(app, &exit_code);
  tierfs::cmd::RegisterProfile(app, &exit_code);
  tierfs::cmd::RegisterSummary(app, &exit_code);
  tierfs::cmd::RegisterDestroy(app, &exit_code);
  tierfs::cmd::RegisterGateway(app, &exit_code);
  tierfs::cmd::RegisterGatewayUser(app, &exit_code);
  tierfs::cmd::RegisterSync(app, &exit_code);
  tierfs::cmd::RegisterChangelog(app, &exit_code);
  tierfs::cmd::RegisterMirror(app, &exit_code);
  tierfs::cmd::RegisterVersion(app, &exit_code);
  // Parse copies; the process's own argv (what `ps` shows) no longer holds secrets.
  std::vector<std::string> args = tierfs::cmd::ScrubSecretsFromArgv(argc, argv);
  // mount(8)'s helper (/sbin/mount.tierfs, a link to this binary): `tierfs mount -d ...`.
  if (std::filesystem::path(args[0]).filename() == "mount.tierfs") {
    int rc = tierfs::cmd::PrepareMountHelper(app, &args);
    if (rc >= 0) return rc;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
