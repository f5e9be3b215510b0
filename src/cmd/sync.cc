// tierfs sync SRC DST [options]: copies what differs from SRC to DST (directories, object
// stores, TierFS volumes; src/sync/ holds the engine, side_spec.h the forms of SRC and
// DST). Exit codes: 0 everything copied or already there; 1 some keys failed (counted,
// named on stderr); 2 the run could not be carried out (bad arguments, a side unreachable
// or failing while listed, a checkpoint that cannot be written).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/metrics_setup.h"
#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "cmd/util.h"
#include "common/size.h"
#include "metrics/metrics.h"
#include "sync/changes.h"
#include "sync/side_spec.h"
#include "sync/syncer.h"

namespace tierfs::cmd {
namespace {

struct Args {
  sync::SideArgs src, dst;
  sync::SyncOptions o;
  std::vector<std::string> include_exclude;  // "+PATTERN" / "-PATTERN" in command-line order
  std::string files_from, min_size, max_size, min_age, max_age, bwlimit;
  std::string metrics;
  bool json = false, quiet = false, verbose = false;
  std::string changes;  // --changes FILE
  int list_threads = 1;
  client::CacheArgs cache;
};

Result<double> ParseDuration(const std::string& text) {
  if (text.empty()) return -1.0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double mult = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : -1;
  if (end == text.c_str() || mult < 0 || v < 0) {
    return Status::Err(EINVAL, "'" + text + "' is not a duration (a number with s, m, h or d)");
  }
  return v * mult;
}

Result<int64_t> OptionalSize(const std::string& text) {
  if (text.empty()) return int64_t{-1};
  ASSIGN_OR_RETURN(uint64_t v, ParseSize(text));
  return static_cast<int64_t>(v);
}

std::string Human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) {
    bytes /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", bytes, units[i]);
  return buf;
}

// The progress line on a terminal: keys listed, copied, bytes, rate, ETA.
class ProgressBar {
 public:
  explicit ProgressBar(const sync::Progress* p) : p_(p), start_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> l(mu_);
      while (!cv_.wait_for(l, std::chrono::milliseconds(500), [&] { return stop_; })) Draw();
    });
  }
  ~ProgressBar() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    Draw();
    std::cerr << "\n";
  }

 private:
  void Draw() {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double rate = secs > 0 ? static_cast<double>(p_->bytes.load()) / secs : 0;
    std::string eta = "?";
    if (rate > 0) {
      double left = static_cast<double>(p_->pending_bytes.load()) / rate;
      eta = std::to_string(static_cast<long>(std::ceil(left))) + "s";
    }
    std::cerr << "\rlisted " << p_->listed.load() << "  copied " << p_->copied.load() << "  skipped "
              << p_->skipped.load() << "  deleted " << p_->deleted.load() << "  failed " << p_->failed.load() << "  "
              << Human(static_cast<double>(p_->bytes.load())) << " at " << Human(rate) << "/s  ETA " << eta
              << "   " << std::flush;
  }

  const sync::Progress* p_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

void AddProgressCollector(const sync::Progress* p) {
  metrics::Default().AddCollector([p](std::vector<metrics::CollectedFamily>* out) {
    metrics::CollectedFamily keys{"tierfs_sync_keys_total", "Keys of the sync run by what happened to them",
                                  "counter", {}};
    auto add = [&](const char* what, uint64_t v) {
      keys.samples.push_back({"tierfs_sync_keys_total", {{"result", what}}, static_cast<double>(v)});
    };
    add("listed", p->listed.load());
    add("found", p->found.load());
    add("copied", p->copied.load());
    add("skipped", p->skipped.load());
    add("deleted", p->deleted.load());
    add("failed", p->failed.load());
    out->push_back(keys);
    out->push_back({"tierfs_sync_bytes_total", "Bytes the sync run copied", "counter",
                    {{"tierfs_sync_bytes_total", {}, static_cast<double>(p->bytes.load())}}});
  });
}

int Run(Args& a) {
  auto fail = [](const Status& st) {
    Fail("sync", st);
    return 2;
  };
  // Descriptors: each directory being walked (and each read ahead) stays open while it is
  // listed, besides the files in flight; lift the soft limit to the hard one, as rsync's
  // and rclone's users would expect a large tree not to fail on EMFILE.
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  for (const std::string& rule : a.include_exclude) a.o.filter.Add(rule[0] == '+', rule.substr(1));
  if (!a.files_from.empty()) {
    std::ifstream in(a.files_from);
    if (!in) return fail(Status::Err(errno, "cannot read --files-from " + a.files_from));
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && line.front() == '/') line.erase(0, 1);
      while (!line.empty() && (line.back() == '/' || line.back() == '\r')) line.pop_back();
      if (!line.empty()) a.o.files_from.insert(line);
    }
    a.o.have_files_from = true;
  }
  auto sizes = {std::make_pair(&a.min_size, &a.o.min_size), std::make_pair(&a.max_size, &a.o.max_size)};
  for (auto [text, out] : sizes) {
    auto v = OptionalSize(*text);
    if (!v.ok()) return fail(v.status().With("--min-size/--max-size"));
    *out = *v;
  }
  auto ages = {std::make_pair(&a.min_age, &a.o.min_age), std::make_pair(&a.max_age, &a.o.max_age)};
  for (auto [text, out] : ages) {
    auto v = ParseDuration(*text);
    if (!v.ok()) return fail(v.status().With("--min-age/--max-age"));
    *out = *v;
  }
  if (!a.bwlimit.empty()) {
    auto v = ParseSize(a.bwlimit);
    if (!v.ok()) return fail(v.status().With("--bwlimit (bytes per second, e.g. 50M)"));
    a.o.bwlimit = static_cast<double>(*v);
  }
  if (a.o.delete_src && a.o.delete_dst) {
    return fail(Status::Err(EINVAL, "--delete-src and --delete-dst together would empty both sides; choose one"));
  }
  // A copy reads each block once: no disk cache unless asked for (its index would be read at
  // every start, and the host's cache directory would fill with one-pass copies).
  if (a.cache.cache_dir.empty()) a.cache.cache_dir = "memory";
  for (sync::SideArgs* s : {&a.src, &a.dst}) {
    s->io_timeout_s = a.cache.io_timeout;
    s->volume.cache = a.cache;
    s->volume.metrics = "0";
    s->volume.backup_meta = 0;
    s->volume.label = "sync";
    s->volume.pack_below = "0";  // packing is for write-back mounts
  }
  a.src.env_prefix = "TIERFS_SRC_";
  a.dst.env_prefix = "TIERFS_DST_";
  auto src = sync::OpenSide(a.src, false);
  if (!src.ok()) return fail(src.status().With("source " + a.src.url));
  auto dst = sync::OpenSide(a.dst, true, a.o.dry_run);
  if (!dst.ok()) return fail(dst.status().With("destination " + a.dst.url));

  (*src)->SetListThreads(a.list_threads);
  (*dst)->SetListThreads(a.list_threads);
  sync::Progress progress;
  AddProgressCollector(&progress);
  auto exporter = client::StartCommandMetrics(a.metrics, (*src)->Describe(), "sync");
  if (!exporter.ok()) return fail(exporter.status().With("--metrics"));
  std::mutex out_mu;
  a.o.report = [&](const std::string& what, const std::string& key, const std::string& detail) {
    std::lock_guard<std::mutex> l(out_mu);
    bool problem = what == "failed" || what == "warning";
    if (!problem && a.quiet) return;
    std::ostream& out = problem || a.json ? std::cerr : std::cout;
    out << (problem ? "\r" : "") << what << " " << key << (detail.empty() ? "" : ": " + detail) << "\n";
  };
  // --changes: an incremental round from the volume's change log (sync/changes.h).
  sync::ChangesPlan plan;
  std::unique_ptr<sync::ChangeScope> scope;
  const std::string identity = a.dst.url + "\n" + (*src)->Describe() + "\n" + sync::OptionsIdentity(a.o);
  if (!a.changes.empty()) {
    auto planned = sync::PlanRound(a.changes, src->get(), identity);
    if (!planned.ok()) return fail(planned.status().With("--changes"));
    plan = std::move(planned).value();
    if (plan.incremental) {
      scope = std::make_unique<sync::ChangeScope>(plan.changes, src->get(), dst->get());
      a.o.scope = scope.get();
    }
    if (!a.quiet) {
      std::cerr << (plan.incremental ? "incremental round: " + std::to_string(plan.records) + " change records, " +
                                           std::to_string(plan.changes.keys.size()) + " entries changed"
                                     : "full round: " + plan.why_full)
                << "\n";
      if (a.verbose) {
        for (const std::string& k : plan.changes.keys) std::cerr << "changed /" << k << "\n";
      }
    }
  }
  Result<sync::Counts> counts = sync::Counts{};
  {
    std::unique_ptr<ProgressBar> bar;
    if (isatty(STDERR_FILENO) && !a.quiet && !a.json) bar = std::make_unique<ProgressBar>(&progress);
    counts = sync::RunSync(src->get(), dst->get(), a.o, &progress);
  }
  if (!counts.ok()) return fail(counts.status());
  const sync::Counts& c = *counts;
  if (!a.changes.empty() && c.failed == 0 && !a.o.dry_run) {
    Status saved = sync::SaveRound(a.changes, src->get(), identity, plan.head);
    if (!saved.ok()) return fail(saved.With("--changes"));
  }
  if (a.json) {
    nlohmann::json j = {{"found", c.found},     {"copied", c.copied}, {"skipped", c.skipped},
                        {"deleted", c.deleted}, {"failed", c.failed}, {"bytes", c.bytes},
                        {"checked", c.checked}, {"dry_run", a.o.dry_run}};
    if (!a.changes.empty()) {
      j["round"] = plan.incremental ? "incremental" : "full";
      j["change_records"] = plan.records;
      j["changed_entries"] = plan.changes.keys.size();
    }
    std::cout << j.dump() << std::endl;
  } else if (!a.quiet) {
    std::cout << (a.o.dry_run ? "would copy " : "copied ") << c.copied << " of " << c.found << " keys ("
              << Human(static_cast<double>(c.bytes)) << "), skipped " << c.skipped << ", deleted " << c.deleted
              << ", failed " << c.failed << "\n";
  }
  return c.failed > 0 ? 1 : 0;
}

}  // namespace

void RegisterSync(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "sync", "Copy what differs from SRC to DST: directories, S3/RADOS/Azure buckets, TierFS volumes (META-URL:/PATH)");
  sub->add_option("SRC", a->src.url, "Source: DIR, http(s)://HOST/BUCKET/PREFIX, rados://POOL/PREFIX, "
                                      "azure+http(s)://HOST/ACCOUNT/CONTAINER/PREFIX, file:///DIR, META-URL:/PATH")
      ->required();
  sub->add_option("DST", a->dst.url, "Destination, in the same forms")->required();
  for (auto [side, name] : {std::make_pair(&a->src, "src"), std::make_pair(&a->dst, "dst")}) {
    std::string n = name;
    sub->add_option("--" + n + "-access-key", side->access_key, "S3 access key id / Azure account / RADOS client of " + n);
    sub->add_option("--" + n + "-secret-key", side->secret_key,
                    "Secret key of " + n + " (prefer $TIERFS_" + (n == "src" ? "SRC" : "DST") + "_SECRET_KEY)");
    sub->add_option("--" + n + "-session-token", side->session_token, "S3 session token of " + n);
    sub->add_option("--" + n + "-ceph-conf", side->ceph_conf, "ceph.conf of a rados " + n);
  }
  sync::SyncOptions& o = a->o;
  sub->add_flag("--update,-u", o.update, "Skip keys that are newer in DST");
  sub->add_flag("--ignore-existing", o.ignore_existing, "Skip keys that exist in DST");
  sub->add_flag("--existing", o.existing, "Only update keys that exist in DST; create none");
  sub->add_flag("--force", o.force, "Copy every key, changed or not");
  sub->add_flag("--checksum,-c", o.checksum,
                "Compare contents (stored MD5s where a side has them, else read) instead of size and time");
  sub->add_option_function<std::string>(
      "--include", [a](const std::string& p) { a->include_exclude.push_back("+" + p); },
      "Include keys matching PATTERN (rsync rules; with --exclude, in command-line order)");
  sub->add_option_function<std::string>(
      "--exclude", [a](const std::string& p) { a->include_exclude.push_back("-" + p); }, "Exclude keys matching PATTERN");
  // Several --include/--exclude: the function runs at each occurrence, in command-line
  // order, which is the order rsync evaluates the rules in.
  for (auto* opt : {sub->get_option("--include"), sub->get_option("--exclude")}) {
    opt->trigger_on_parse()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->allow_extra_args(false);
  }
  sub->add_option("--files-from", a->files_from, "Only the paths listed in FILE (one per line; a directory: all below)");
  sub->add_option("--min-size", a->min_size, "Skip files smaller than SIZE");
  sub->add_option("--max-size", a->max_size, "Skip files larger than SIZE");
  sub->add_option("--min-age", a->min_age, "Skip files modified less than AGE ago (30s, 5m, 2h, 1d)");
  sub->add_option("--max-age", a->max_age, "Skip files modified more than AGE ago");
  sub->add_option("--start", o.start, "First key to sync (keys in byte order; directories end in /)");
  sub->add_option("--end", o.end, "Last key to sync");
  sub->add_flag("--dirs", o.dirs, "Copy directories, empty ones too (object stores: KEY/ marker objects)");
  sub->add_flag("--perms", o.perms, "Copy modes and owners (between POSIX sides)");
  sub->add_flag("--links,-l", o.links, "Copy symlinks as symlinks (default: skip them)");
  sub->add_flag("--hard-links,-H", o.hard_links, "Keep hard links (between POSIX sides)");
  sub->add_flag("--xattrs,-X", o.xattrs, "Copy user.* extended attributes (between POSIX sides)");
  sub->add_flag("--delete-dst", o.delete_dst, "Delete keys of DST that SRC does not have");
  sub->add_flag("--delete-src", o.delete_src, "Delete keys from SRC once DST is verified to hold them");
  sub->add_flag("--dry-run,-n", o.dry_run, "List what would change, change nothing");
  sub->add_flag("--check-new", o.check_new, "Read back and compare every key copied");
  sub->add_flag("--check-all", o.check_all, "Compare the contents of every key, copied or not");
  sub->add_option("--checkpoint", o.checkpoint,
                  "Record progress in FILE; a run killed at any point and run again continues from it");
  sub->add_option("--changes", a->changes,
                  "Incremental rounds from a TierFS volume: FILE keeps the change-log sequence the last round "
                  "reached; this round lists only what the volume's change log says changed since (the first "
                  "round, and any round the log cannot serve, lists everything)");
  sub->add_option("--threads,-p", o.threads, "Copies in flight")->capture_default_str()->check(CLI::Range(1, 1024));
  sub->add_option("--list-threads", a->list_threads,
                  "Threads per directory or volume side that read directories ahead of the merge (object "
                  "stores are listed by one thread)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--part-size", a->dst.store.part_size, "Objects larger than this go up in parts of this size")
      ->capture_default_str();
  sub->add_option("--parts-in-flight", a->dst.store.parts_in_flight,
                  "Parts of large objects being read and sent at once, over all objects; each holds --part-size "
                  "bytes of memory (default: no limit but 4 per object, so --threads x 4 at most)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--bwlimit", a->bwlimit, "Bytes per second over all copies (e.g. 50M)");
  sub->add_option("--metrics", a->metrics, "Serve Prometheus metrics at http://ADDR:PORT/metrics while it runs");
  sub->add_flag("--json", a->json, "Print the summary as one JSON object on stdout");
  sub->add_flag("--quiet,-q", a->quiet, "Print only failures");
  AddCacheOptions(sub, &a->cache);
  sub->callback([a, exit_code] { *exit_code = Run(*a); });
}

}  // namespace tierfs::cmd
