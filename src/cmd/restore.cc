// tierfs restore META-URL HOUR... [--path ENTRY]: puts the entries of trash hour directories
// (`ls MOUNTPOINT/.trash`) back where they were removed from, refusing to overwrite a name
// taken since. A tree removed with rm -rf or rmr comes back whole: its directories are
// restored before what they held (entries wait until their directory is back). --path
// restores one entry (and, for a directory, what the named hours hold of its tree).
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cmd/commands.h"
#include "cmd/util.h"
#include "meta/meta.h"

namespace tierfs::cmd {
namespace {

struct Args {
  std::string meta_url, path;
  std::vector<std::string> hours;
  bool json = false;
};

struct Entry {
  std::string hour, name;
  Ino parent = 0, ino = 0;
};

int Run(const Args& a) {
  auto meta = OpenVolume(a.meta_url, false);
  if (!meta.ok()) return Fail("restore", meta.status());
  Meta* m = meta->get();
  const Ctx root = Ctx::Root();
  auto trash = m->Lookup(root, kRootIno, ".trash");
  if (!trash.ok()) return Fail("restore", trash.status().With("the volume has no trash"));
  std::vector<Entry> all;
  for (const std::string& hour : a.hours) {
    auto h = m->Lookup(root, trash->first, hour);
    if (!h.ok()) return Fail("restore", h.status().With("no hour '" + hour + "' in the trash"));
    auto entries = m->Readdir(root, h->first, false);
    if (!entries.ok()) return Fail("restore", entries.status());
    for (const DirEntry& e : *entries) {
      Entry x;
      x.hour = hour;
      x.name = e.name;
      std::string name;
      if (!Meta::ParseTrashName(e.name, &x.parent, &x.ino, &name)) continue;  // not a trash entry
      all.push_back(x);
    }
  }
  std::vector<Entry> pending;
  if (!a.path.empty()) {
    std::string entry = a.path;
    if (auto slash = entry.rfind('/'); slash != std::string::npos) entry = entry.substr(slash + 1);
    for (const Entry& e : all) {
      if (e.name == entry) pending.push_back(e);
    }
    if (pending.empty()) {
      return Fail("restore", Status::Err(ENOENT, "no entry '" + a.path + "' in the named trash hours"));
    }
  } else {
    pending = all;
  }
  // Entries of the named hours by the directory they were removed from: what --path adds
  // when it brings back a directory.
  std::multimap<Ino, const Entry*> by_parent;
  for (const Entry& e : all) by_parent.emplace(e.parent, &e);

  uint64_t restored = 0;
  std::vector<std::string> failed;
  for (bool progress = true; progress && !pending.empty();) {
    progress = false;
    std::vector<Entry> next;
    for (const Entry& e : pending) {
      Status st = m->RestoreFromTrash(root, e.hour, e.name);
      if (st.ok()) {
        restored++;
        progress = true;
        if (!a.path.empty()) {
          auto [lo, hi] = by_parent.equal_range(e.ino);
          for (auto it = lo; it != hi; ++it) next.push_back(*it->second);
        }
      } else if (st.code() == EAGAIN) {
        next.push_back(e);  // its directory is still in the trash: maybe later in this run
      } else {
        failed.push_back(e.hour + "/" + e.name + ": " + st.message());
      }
    }
    pending.swap(next);
  }
  for (const Entry& e : pending) {
    failed.push_back(e.hour + "/" + e.name + ": its directory is in the trash and not among the restored entries");
  }
  if (a.json) {
    std::cout << nlohmann::json{{"restored", restored}, {"failed", failed}}.dump() << std::endl;
  } else {
    for (const std::string& f : failed) std::cerr << "tierfs restore: not restored: " << f << "\n";
    std::cout << "restored " << restored << " entries" << (failed.empty() ? "" : ", " + std::to_string(failed.size()) + " not restored") << "\n";
  }
  return failed.empty() ? 0 : 1;
}

}  // namespace

void RegisterRestore(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("restore", "Put entries of the trash back where they were removed from");
  sub->add_option("META-URL", args->meta_url, "Metadata engine of the volume")->required();
  sub->add_option("HOUR", args->hours, "Hour directories of the trash, as `ls MOUNTPOINT/.trash` lists them")
      ->required();
  sub->add_option("--path", args->path, "Restore only this entry of those hours (as `ls .trash/HOUR` lists it)");
  sub->add_flag("--json", args->json, "Print the result as JSON");
  sub->callback([args, exit_code] { *exit_code = Run(*args); });
}

}  // namespace tierfs::cmd
