#include "common/dir_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tierfs {
namespace {

// Messages keep at most this much of a path (its end).
constexpr size_t kShownMax = 1024;

std::string Shorten(std::string s) {
  if (s.size() <= kShownMax) return s;
  return "..." + s.substr(s.size() - (kShownMax - 3));
}

std::string Join(const std::string& dir, const std::string& name) {
  return Shorten(dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name);
}

Status Errno(int err, const std::string& what) { return Status::Err(err, what + ": " + std::strerror(err)); }

// One directory on the way down: its name, who it is (to check the way back up), and the
// subdirectories still to visit.
struct Level {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;                  // in its parent (the root: the path given)
  std::vector<std::string> subdirs;  // still to visit, in reverse order (popped from the back)
};

// The path of stack's deepest level (and `name` in it, when not empty) for messages: from
// the end, at most about kShownMax characters, so the cost is bounded at any depth.
std::string ShownPath(const std::vector<Level>& stack, const std::string& name) {
  std::string tail = name;
  for (size_t i = stack.size(); i-- > 0;) {
    if (tail.size() > kShownMax) break;
    const std::string& n = stack[i].name;
    tail = tail.empty() ? n : (!n.empty() && n.back() == '/' ? n + tail : n + "/" + tail);
  }
  return Shorten(tail);
}

// Reads dir (which the caller opened as fd; ownership passes to the walk's WalkDir) and
// hands its regular files to on_file; fills level->subdirs. false in *go_on: stop.
Status ReadLevel(const std::shared_ptr<WalkDir>& dir, Level* level, const std::function<bool(WalkFile)>& on_file,
                 bool* go_on) {
  int fd = fcntl(dir->fd(), F_DUPFD_CLOEXEC, 0);  // fdopendir owns its descriptor
  if (fd < 0) return Errno(errno, "cannot read directory " + dir->shown());
  DIR* d = fdopendir(fd);
  if (!d) {
    int err = errno;
    close(fd);
    return Errno(err, "cannot read directory " + dir->shown());
  }
  Status st;
  errno = 0;
  while (dirent* e = readdir(d)) {
    const char* n = e->d_name;
    if (std::strcmp(n, ".") == 0 || std::strcmp(n, "..") == 0) continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat s;
      if (fstatat(dir->fd(), n, &s, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
      type = S_ISDIR(s.st_mode) ? DT_DIR : S_ISREG(s.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type == DT_DIR) {
      level->subdirs.emplace_back(n);
    } else if (type == DT_REG) {
      if (!on_file(WalkFile{dir, n})) {
        *go_on = false;
        break;
      }
    }
    errno = 0;
  }
  if (*go_on && errno != 0) st = Errno(errno, "cannot read directory " + dir->shown());
  closedir(d);
  // Depth first in the order readdir gave: the first subdirectory is visited first.
  std::reverse(level->subdirs.begin(), level->subdirs.end());
  return st;
}

Status WalkTree(const std::string& root, const std::function<bool(WalkFile)>& on_file, bool* go_on) {
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open directory " + root);
  std::vector<Level> stack;
  std::shared_ptr<WalkDir> cur = std::make_shared<WalkDir>(fd, Shorten(root));
  std::string cur_name = root;
  for (;;) {
    struct stat s;
    if (fstat(cur->fd(), &s) != 0) return Errno(errno, "cannot stat directory " + cur->shown());
    Level level;
    level.dev = s.st_dev;
    level.ino = s.st_ino;
    level.name = std::move(cur_name);
    RETURN_IF_ERROR(ReadLevel(cur, &level, on_file, go_on));
    if (!*go_on) return Status::OK();
    stack.push_back(std::move(level));
    // The next directory: the deepest level's next subdirectory, climbing while levels
    // are done. Only `cur` is open (plus what the caller holds).
    for (;;) {
      Level& top = stack.back();
      if (!top.subdirs.empty()) {
        std::string name = std::move(top.subdirs.back());
        top.subdirs.pop_back();
        int child = openat(cur->fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) {
          if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) continue;  // removed or replaced meanwhile
          return Errno(errno, "cannot open directory " + ShownPath(stack, name));
        }
        cur = std::make_shared<WalkDir>(child, ShownPath(stack, name));
        cur_name = std::move(name);
        break;
      }
      std::string left = ShownPath(stack, "");
      stack.pop_back();
      if (stack.empty()) return Status::OK();
      // Back up to the parent, which must still be the directory we came down from.
      int up = openat(cur->fd(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (up < 0) return Errno(errno, "cannot go back up from " + left);
      struct stat ps;
      if (fstat(up, &ps) != 0 || ps.st_dev != stack.back().dev || ps.st_ino != stack.back().ino) {
        close(up);
        return Status::Err(EAGAIN, "directory " + left + " was moved while it was walked; run again");
      }
      cur = std::make_shared<WalkDir>(up, ShownPath(stack, ""));
    }
  }
}

}  // namespace

WalkDir::~WalkDir() { close(fd_); }

std::string WalkFile::Path() const {
  if (!dir) return name;
  return "/proc/self/fd/" + std::to_string(dir->fd()) + "/" + name;
}

std::string WalkFile::Shown() const { return dir ? Join(dir->shown(), name) : name; }

Status WalkRegularFiles(const std::vector<std::string>& paths, const std::function<bool(WalkFile)>& on_file) {
  bool go_on = true;
  for (const std::string& p : paths) {
    struct stat s;
    if (lstat(p.c_str(), &s) != 0) return Errno(errno == ENOENT ? ENOENT : errno, "cannot stat " + p);
    if (S_ISDIR(s.st_mode)) {
      RETURN_IF_ERROR(WalkTree(p, on_file, &go_on));
    } else if (S_ISREG(s.st_mode)) {
      go_on = on_file(WalkFile{nullptr, p});
    }
    if (!go_on) break;
  }
  return Status::OK();
}

}  // namespace tierfs
