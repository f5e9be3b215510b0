// mount.tierfs: mount(8)'s options to `tierfs mount` arguments, and back for fstab.
#include "cmd/mount_helper.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <set>

namespace tierfs::cmd {
namespace {

// Options mount(8) and fstab own: nothing for `tierfs mount` to do with them.
bool OwnedByMount(const std::string& name) {
  static const std::set<std::string> kOwned = {"defaults", "auto", "noauto", "user", "nouser", "users", "owner",
                                               "group", "nofail", "_netdev", "rw", "comment", "loop", "offset",
                                               "sizelimit"};
  return kOwned.count(name) > 0 || name.rfind("x-", 0) == 0;
}

void SplitOptions(const std::string& s, std::vector<std::string>* out) {
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string one = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!one.empty()) out->push_back(one);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

}  // namespace

Result<MountHelperCommand> MountHelperArgs(const std::vector<std::string>& argv, const MountOptionKindFn& kind) {
  MountHelperCommand cmd;
  std::vector<std::string> positional, options;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-o" || a == "-t" || a == "-N") {
      if (i + 1 == argv.size()) return Status::Err(EINVAL, a + " needs a value");
      const std::string& v = argv[++i];
      if (a == "-o") SplitOptions(v, &options);
      if (a == "-N") return Status::Err(EINVAL, "-N (mount in another namespace) is not supported");
      // -t tierfs[.subtype]: the type, already known.
    } else if (a.rfind("-o", 0) == 0 && a.size() > 2) {
      SplitOptions(a.substr(2), &options);
    } else if (a.size() > 1 && a[0] == '-') {
      for (size_t k = 1; k < a.size(); ++k) {
        switch (a[k]) {
          case 's':  // sloppy: tierfs mount reports what it does not know anyway
          case 'n':  // no /etc/mtab: there is none to write
            break;
          case 'f':
            cmd.fake = true;
            break;
          case 'v':
            cmd.verbose = true;
            break;
          default:
            return Status::Err(EINVAL, std::string("unknown option -") + a[k] + " (mount.tierfs SPEC DIR [-sfnv] [-o OPTIONS])");
        }
      }
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    return Status::Err(EINVAL, "usage: mount.tierfs META-URL MOUNTPOINT [-sfnv] [-o OPTIONS]");
  }
  cmd.args = {positional[0], positional[1], "-d"};
  std::vector<std::string> fuse;
  for (const std::string& o : options) {
    size_t eq = o.find('=');
    std::string name = o.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    if (OwnedByMount(name)) continue;
    if (name == "ro" && !has_value) {
      cmd.args.push_back("--read-only");
      continue;
    }
    if (name == "meta-password-file" || name == "meta_password_file") {
      if (!has_value || eq + 1 == o.size()) return Status::Err(EINVAL, "meta-password-file needs a value: meta-password-file=PATH");
      cmd.meta_password_file = o.substr(eq + 1);
      continue;
    }
    if (name == "background" || name == "d") continue;  // always
    std::string dashed = name;
    for (char& c : dashed) {
      if (c == '_') c = '-';
    }
    MountOptionKind k = kind(name);
    if (k == MountOptionKind::kUnknown && dashed != name) {
      k = kind(dashed);
      if (k != MountOptionKind::kUnknown) name = dashed;
    }
    if (k == MountOptionKind::kUnknown) {
      fuse.push_back(o);
    } else if (k == MountOptionKind::kFlag) {
      if (has_value) return Status::Err(EINVAL, "option " + name + " is a flag: write it without a value");
      cmd.args.push_back("--" + name);
    } else {
      if (!has_value) return Status::Err(EINVAL, "option " + name + " needs a value: " + name + "=VALUE");
      cmd.args.push_back("--" + name);
      cmd.args.push_back(o.substr(eq + 1));
    }
  }
  if (!fuse.empty()) {
    std::string joined;
    for (const auto& f : fuse) joined += (joined.empty() ? "" : ",") + f;
    cmd.args.push_back("-o");
    cmd.args.push_back(joined);
  }
  return cmd;
}

int PrepareMountHelper(const CLI::App& app, std::vector<std::string>* args) {
  const CLI::App* mount = nullptr;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return a->get_name() == "mount"; })) {
    mount = sub;
  }
  auto kind = [mount](const std::string& name) {
    if (name.empty() || name == "help" || name == "background" || name == "update-fstab") {
      return MountOptionKind::kUnknown;
    }
    const CLI::Option* opt = mount ? mount->get_option_no_throw("--" + name) : nullptr;
    if (!opt) return MountOptionKind::kUnknown;
    return opt->get_expected_max() == 0 ? MountOptionKind::kFlag : MountOptionKind::kValue;
  };
  auto cmd = MountHelperArgs(std::vector<std::string>(args->begin() + 1, args->end()), kind);
  if (!cmd.ok()) {
    std::cerr << "mount.tierfs: " << cmd.status().message() << std::endl;
    return 1;
  }
  if (!cmd->meta_password_file.empty()) setenv("TIERFS_META_PASSWORD_FILE", cmd->meta_password_file.c_str(), 1);
  if (cmd->verbose || cmd->fake) {
    std::cerr << "mount.tierfs: tierfs mount";
    for (const auto& a : cmd->args) std::cerr << " " << a;
    std::cerr << std::endl;
  }
  if (cmd->fake) return 0;
  std::vector<std::string> rewritten = {args->front(), "mount"};
  rewritten.insert(rewritten.end(), cmd->args.begin(), cmd->args.end());
  *args = std::move(rewritten);
  return -1;
}

Result<std::string> FstabOptionsField(const std::vector<std::string>& given) {
  std::string field = "_netdev";
  for (const std::string& o : given) {
    if (o.empty()) continue;
    if (o.find_first_of(", \t\n\\#") != std::string::npos) {
      return Status::Err(EINVAL, "option " + o + " cannot be written to fstab (a comma, whitespace, '\\' or '#' in it)");
    }
    field += "," + o;
  }
  return field;
}

}  // namespace tierfs::cmd
