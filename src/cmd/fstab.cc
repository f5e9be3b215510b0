// The fstab line of a mount and its place in /etc/fstab (`tierfs mount --update-fstab`).
#include "cmd/fstab.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "cmd/mount_helper.h"
#include "cmd/util.h"
#include "common/url.h"

namespace tierfs::cmd {
namespace {

// fstab fields escape whitespace and backslashes as octal (\040), as getmntent(3) reads them.
std::string EscapeField(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      char buf[8];
      snprintf(buf, sizeof buf, "\\%03o", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && isdigit(s[i + 1]) && isdigit(s[i + 2]) && isdigit(s[i + 3])) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The mount point (second field) of an fstab line; "" for comments and blank lines.
std::string MountPointOf(const std::string& line) {
  std::istringstream in(line);
  std::string spec, dir;
  if (!(in >> spec) || spec[0] == '#' || !(in >> dir)) return "";
  return UnescapeField(dir);
}

// The META-URL without its password ("redis://user:pw@host" -> "redis://user@host").
std::string WithoutPassword(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  size_t start = scheme + 3;
  size_t at = url.find('@', start);
  size_t slash = url.find('/', start);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  size_t colon = url.find(':', start);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + url.substr(at);
}

}  // namespace

std::string FstabPath() {
  const char* p = std::getenv("TIERFS_FSTAB");
  return p && *p ? p : "/etc/fstab";
}

Result<std::string> FstabLineFor(const CLI::App& sub, const std::string& meta_url, const std::string& mountpoint,
                                 const std::map<std::string, std::string>& resolved) {
  std::vector<std::string> given;
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->count() == 0 || opt->get_positional()) continue;
    std::string name = opt->get_lnames().empty() ? "" : opt->get_lnames().front();
    if (name == "help" || name == "background" || name == "update-fstab") continue;
    if (name.empty()) {
      // -o: FUSE mount options, written as they are (mount.tierfs passes them back to -o).
      if (opt->get_snames() == std::vector<std::string>{"o"}) {
        for (const std::string& r : opt->results()) {
          size_t pos = 0;
          while (pos <= r.size()) {
            size_t comma = r.find(',', pos);
            std::string one = r.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            if (!one.empty() && one != "rw") given.push_back(one);
            if (comma == std::string::npos) break;
            pos = comma + 1;
          }
        }
      }
      continue;
    }
    if (name == "read-only") {
      given.push_back("ro");
    } else if (opt->get_expected_max() == 0) {
      given.push_back(name);
    } else {
      auto it = resolved.find(name);
      given.push_back(name + "=" + (it != resolved.end() ? it->second : opt->results().back()));
    }
  }
  std::string spec = meta_url;
  auto url = ParseUrl(meta_url);
  const char* pw_file = std::getenv("TIERFS_META_PASSWORD_FILE");
  const char* pw = std::getenv("TIERFS_META_PASSWORD");
  if (url.ok() && (url->scheme == "redis" || url->scheme == "rediss" || url->scheme == "postgres" ||
                   url->scheme == "postgresql")) {
    const bool in_url = !url->password.empty();
    if (in_url) spec = WithoutPassword(meta_url);
    if (pw_file && *pw_file) {
      given.push_back("meta-password-file=" + AbsPath(pw_file));
    } else if (in_url || (pw && *pw)) {
      return Status::Err(EINVAL,
                         std::string("the metadata password ") + (in_url ? "is in the META-URL" : "comes from $TIERFS_META_PASSWORD") +
                             ", and fstab is readable by every user: put it in a file only root reads and name it "
                             "in $TIERFS_META_PASSWORD_FILE (the line then says meta-password-file=FILE)");
    }
  }
  ASSIGN_OR_RETURN(std::string options, FstabOptionsField(given));
  return EscapeField(spec) + " " + EscapeField(mountpoint) + " tierfs " + options + " 0 0";
}

std::string MountSource(const std::string& meta_url, const std::string& volume) {
  std::string spec = WithoutPassword(meta_url);
  std::string lower = spec;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // /proc/mounts is readable by every user: a password in the query (PostgreSQL's
  // ?password=) must not get there either.
  if (spec.empty() || spec.find_first_of(", \t\n\\") != std::string::npos ||
      lower.find("password") != std::string::npos) {
    return "tierfs:" + volume;
  }
  return spec;
}

Status UpdateFstab(const std::string& path, const std::string& mountpoint, const std::string& line) {
  std::vector<std::string> lines;
  struct stat st;
  bool exists = stat(path.c_str(), &st) == 0;
  if (exists) {
    std::ifstream in(path);
    if (!in) return Status::Err(errno, "cannot read " + path + ": " + strerror(errno));
    std::string l;
    while (std::getline(in, l)) lines.push_back(l);
    if (in.bad()) return Status::Err(EIO, "cannot read " + path);
  } else if (errno != ENOENT) {
    return Status::Err(errno, "cannot stat " + path + ": " + strerror(errno));
  }
  bool placed = false;
  std::vector<std::string> out;
  for (auto& l : lines) {
    if (MountPointOf(l) != mountpoint) {
      out.push_back(l);
    } else if (!placed) {
      out.push_back(line);
      placed = true;
    }
  }
  if (!placed) out.push_back(line);
  std::string text;
  for (const auto& l : out) text += l + "\n";
  std::string tmp = path + ".tierfs-tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, exists ? (st.st_mode & 07777) : 0644);
  if (fd < 0) return Status::Err(errno, "cannot write " + tmp + ": " + strerror(errno));
  auto fail = [&](const std::string& what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return Status::Err(err, what + " " + tmp + ": " + strerror(err));
  };
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (exists && (fchmod(fd, st.st_mode & 07777) != 0 || fchown(fd, st.st_uid, st.st_gid) != 0)) {
    return fail("cannot set the mode and owner of");
  }
  if (fsync(fd) != 0) return fail("cannot fsync");
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::Err(err, "cannot replace " + path + ": " + strerror(err));
  }
  return Status::OK();
}

}  // namespace tierfs::cmd
