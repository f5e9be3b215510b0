// tierfs gateway META-URL ADDR:PORT [options]: the S3 gateway (src/gateway/) over a volume.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "client/volume.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "gateway/gateway.h"
#include "gateway/users.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, listen, log_file, access_log;
  bool multi_buckets = false, anonymous = false;
  std::string subdir, domain, region = "us-east-1";
  std::string primary;  // a mirror's writes go to this primary (mirror/forward_writes.h)
  std::string access_key, secret_key_file;
  int64_t uid = -1, gid = -1;
  std::string umask = "022";
  std::string cert_file, key_file;
  int threads = 64;
  std::string buffer_size = "300M";
  std::string metrics;
  double upload_max_age_h = 24 * 7;
  CacheArgs cache;
  client::GroupArgs group;
};

int Run(const Args& a) {
  const sigset_t stop = BlockStopSignals();  // taken by sigwait below
  SetupLogging(a.log_file, true);
  auto fail = [](const Status& st) { return Fail("gateway", st); };
  size_t colon = a.listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == a.listen.size()) {
    return fail(Status::Err(EINVAL, "give the address to listen on as ADDR:PORT (for example 127.0.0.1:9000)"));
  }
  gateway::GatewayOptions o;
  o.host = a.listen.substr(0, colon);
  if (o.host.empty()) o.host = "0.0.0.0";
  try {
    o.port = std::stoi(a.listen.substr(colon + 1));
  } catch (const std::exception&) {
    o.port = -1;
  }
  if (o.port < 0 || o.port > 65535) return fail(Status::Err(EINVAL, "bad port in " + a.listen));
  o.multi_buckets = a.multi_buckets;
  o.domain = a.domain;
  o.region = a.region;
  o.anonymous = a.anonymous;
  o.cert_file = a.cert_file;
  o.key_file = a.key_file;
  o.threads = a.threads;
  o.access_log = a.access_log;
  o.upload_max_age_s = static_cast<uint64_t>(a.upload_max_age_h * 3600);
  o.uid = a.uid >= 0 ? static_cast<uint32_t>(a.uid) : getuid();
  o.gid = a.gid >= 0 ? static_cast<uint32_t>(a.gid) : getgid();
  try {
    o.umask = static_cast<uint32_t>(std::stoul(a.umask, nullptr, 8)) & 0777;
  } catch (const std::exception&) {
    return fail(Status::Err(EINVAL, "--umask " + a.umask + ": give an octal mask such as 022"));
  }
  if (a.group.name.empty() && (!a.group.addr.empty() || a.group.no_sharing)) {
    return fail(Status::Err(EINVAL, "--group-addr and --no-sharing only apply to a cache group member: add "
                                    "--cache-group NAME or leave them out"));
  }
  auto secret = gateway::ReadSecretKey(a.secret_key_file);
  if (!secret.ok()) return fail(secret.status());
  if (!a.access_key.empty()) {
    if (secret->empty()) {
      return fail(Status::Err(EINVAL, "--access-key needs its secret: set TIERFS_GATEWAY_SECRET_KEY or give "
                                      "--secret-key-file FILE (never on the command line)"));
    }
    gateway::GatewayUser u;
    u.access_key = a.access_key;
    u.secret_key = *secret;
    u.uid = o.uid;
    u.gid = o.gid;
    u.display_name = a.access_key;
    o.user = u;
  }
  // The same client a mount is (client/volume.h), without the kernel.
  client::VolumeOptions vo;
  vo.meta_url = a.meta_url;
  vo.label = "s3://" + a.listen;
  vo.buffer_size = a.buffer_size;
  vo.cache = a.cache;
  vo.group = a.group;
  vo.subdir = a.subdir;
  vo.primary_url = a.primary;
  vo.metrics = a.metrics.empty() ? "0" : a.metrics;
  vo.backup_meta = 0;  // the mounts take the backups
  auto volume = client::Volume::Open(vo);
  if (!volume.ok()) return fail(volume.status());
  o.volume_name = (*volume)->format().name;
  o.root = (*volume)->root();
  int rc = 0;
  {
    gateway::Gateway gw((*volume)->vfs(), o);
    Status started = gw.Start();
    if (!started.ok()) {
      rc = fail(started);
    } else {
      std::string scheme = a.cert_file.empty() ? "http" : "https";
      spdlog::info("S3 gateway for volume {} on {}://{}{}", o.volume_name, scheme, gw.address(),
                   a.multi_buckets ? " (top-level directories are buckets)" : " (bucket " + o.volume_name + ")");
      std::cerr << "tierfs: S3 gateway of volume " << o.volume_name << " on " << scheme << "://" << gw.address()
                << std::endl;
      int sig = 0;
      sigwait(&stop, &sig);
      spdlog::info("signal {}: finishing the requests in flight", sig);
      gw.Stop();
    }
  }
  (*volume)->Close();
  spdlog::info("gateway exited");
  return rc;
}

}  // namespace

void RegisterGateway(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("gateway", "Serve a volume over the S3 API (no mount needed)");
  sub->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("ADDR:PORT", a->listen, "Address to listen on, e.g. 127.0.0.1:9000 (0.0.0.0:9000 for all)")
      ->required();
  sub->add_flag("--multi-buckets", a->multi_buckets, "Each top-level directory is a bucket (else the volume is one "
                                                    "bucket named after it)");
  sub->add_option("--subdir", a->subdir, "Serve only this directory of the volume");
  sub->add_option("--primary", a->primary,
                  "A mirror volume only: write through the primary at this META-URL (as `mount --primary`); without "
                  "it a mirror is served read-only");
  sub->add_option("--access-key", a->access_key,
                  "Access key of the gateway's own user (its secret from $TIERFS_GATEWAY_SECRET_KEY or "
                  "--secret-key-file)");
  sub->add_option("--secret-key-file", a->secret_key_file, "File holding the secret key of --access-key");
  sub->add_flag("--anonymous", a->anonymous, "Serve requests without credentials, read-only, as uid/gid 65534");
  sub->add_option("--uid", a->uid, "Owner of what the gateway's own user creates (default: this process's)");
  sub->add_option("--gid", a->gid, "Group of what the gateway's own user creates (default: this process's)");
  sub->add_option("--umask", a->umask, "Umask for created objects and directories")->capture_default_str();
  sub->add_option("--domain", a->domain, "Accept virtual-host style requests: BUCKET.DOMAIN");
  sub->add_option("--region", a->region, "Region the gateway reports")->capture_default_str();
  sub->add_option("--cert-file", a->cert_file, "Serve HTTPS with this certificate (PEM)");
  sub->add_option("--key-file", a->key_file, "... and this private key (PEM)");
  sub->add_option("--threads", a->threads, "Connections served at once")->capture_default_str();
  sub->add_option("--access-log", a->access_log, "Write one line per request to this file ('-': stderr)");
  sub->add_option("--log", a->log_file, "Log file (default: stderr)");
  sub->add_option("--buffer-size", a->buffer_size, "Memory for data being written and read")->capture_default_str();
  sub->add_option("--metrics", a->metrics, "Serve Prometheus metrics on ADDR:PORT");
  sub->add_option("--upload-max-age", a->upload_max_age_h,
                  "Hours after which an abandoned multipart upload is removed")
      ->capture_default_str();
  AddCacheOptions(sub, &a->cache);
  AddGroupOptions(sub, &a->group);
  sub->callback([a, exit_code] {
    MakeCacheDirsAbsolute(&a->cache);
    *exit_code = Run(*a);
  });
}

}  // namespace tierfs::cmd
