// tierfs fsck META-URL [--path P] [--repair] [--deep] [--json]: check (and repair what needs no
// guess) the namespace, link counts and block objects of a volume. Exit status: 0 when
// nothing is wrong (or everything found was repaired), 1 when problems remain.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/client_options.h"
#include "cmd/commands.h"
#include "client/metrics_setup.h"
#include "cmd/util.h"
#include "meta/meta.h"
#include "object/object_store.h"
#include "tools/fsck.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string metrics;  // --metrics ADDR:PORT while it runs ("": none)
  std::string meta_url, path = "/";
  bool repair = false, json = false, skip_objects = false, deep = false;
  int threads = 16;
};

int Run(const Args& a) {
  auto meta = OpenVolume(a.meta_url, !a.repair);
  if (!meta.ok()) return Fail("fsck", meta.status());
  const FormatRecord& f = (*meta)->format();
  auto store = OpenStore(f);
  if (!store.ok()) return Fail("fsck", store.status());
  auto exporter = StartCommandMetrics(a.metrics, f.name, "fsck");
  if (!exporter.ok()) return Fail("fsck", exporter.status().With("--metrics"));
  FsckOptions opts;
  opts.path = a.path;
  opts.repair = a.repair;
  opts.check_objects = !a.skip_objects;
  opts.deep = a.deep;
  opts.threads = a.threads;
  if (a.deep && a.skip_objects) {
    return Fail("fsck", Status::Err(EINVAL, "--deep and --skip-objects exclude each other"));
  }
  opts.progress = [](const std::string& m) { std::cerr << "fsck: " << m << std::endl; };
  auto r = CheckVolume(meta->get(), store->get(), opts);
  if (!r.ok()) return Fail("fsck", r.status());
  if (a.json) {
    nlohmann::json probs = nlohmann::json::array();
    for (const auto& p : r->problems) {
      probs.push_back({{"kind", p.kind}, {"path", p.path}, {"detail", p.detail}, {"repaired", p.repaired}});
    }
    nlohmann::json j = {{"dirs", r->dirs},       {"files", r->files},
                        {"others", r->others},   {"objects_checked", r->objects_checked},
                        {"bytes_verified", r->bytes_verified},
                        {"problems", probs},     {"remaining", r->Remaining()}};
    std::cout << j.dump(2) << std::endl;
  } else {
    for (const auto& p : r->problems) {
      std::cout << (p.repaired ? "repaired " : "") << p.kind << ": " << p.path << ": " << p.detail << "\n";
    }
    std::cout << "checked " << r->dirs << " directories, " << r->files << " files, " << r->others
              << " other inodes, " << r->objects_checked << " objects"
              << (a.deep ? " (" + std::to_string(r->bytes_verified) + " bytes read and verified)" : "")
              << ": " << r->problems.size() << " problems, "
              << r->Remaining() << " remaining" << (a.repair || r->Remaining() == 0 ? "" : " (--repair fixes link counts and removes dangling and damaged entries)")
              << std::endl;
  }
  return r->Remaining() == 0 ? 0 : 1;
}

}  // namespace

void RegisterFsck(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("fsck", "Check a volume's namespace, link counts and block objects");
  sub->add_option("META-URL", a->meta_url, "Metadata engine of the volume")->required();
  AddCommandMetricsOption(sub, &a->metrics);
  sub->add_option("--path", a->path, "Check only this directory tree of the volume")->capture_default_str();
  sub->add_flag("--repair", a->repair, "Fix link counts and remove entries whose inode is gone, and damaged entries");
  sub->add_flag("--skip-objects", a->skip_objects, "Do not check that block objects exist");
  sub->add_flag("--deep", a->deep,
                "Read every block in full and verify its checksums (finds corrupted data, not only missing objects)");
  sub->add_option("--threads", a->threads, "Concurrent object checks")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->add_flag("--json", a->json, "Print the report as JSON");
  sub->callback([a, exit_code] { *exit_code = Run(*a); });
}

}  // namespace tierfs::cmd
